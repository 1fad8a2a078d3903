package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (linux/ethtool.h).
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ifreqData is struct ifreq with the ifr_data member (linux/if.h), padded
// to the union's full size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// rxQueueCount returns the interface's combined channel count, or its rx
// channel count for drivers (veth) that report no combined channels, or 1
// when ethtool cannot tell.
func rxQueueCount(ifname string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(&ch)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 1
	}
	switch {
	case ch.combinedCount > 0:
		return int(ch.combinedCount)
	case ch.rxCount > 0:
		return int(ch.rxCount)
	}
	return 1
}

// driverName returns the interface's driver as ethtool reports it ("veth",
// "ixgbe", ...), or "" if it cannot tell.
func driverName(ifname string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// DriverName is the interface's driver as ethtool reports it ("veth",
// "mlx5_core"), or "" if it cannot be read.
func DriverName(ifname string) string { return driverName(ifname) }
