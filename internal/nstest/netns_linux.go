package nstest

import "golang.org/x/sys/unix"

func (ns *Netns) join(fn func() error) error {
	fd, err := unix.Open("/var/run/netns/"+ns.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return err
	}
	return fn()
}
