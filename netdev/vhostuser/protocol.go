package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev/vhostuser/virtq"
)

// Front-end requests (vhost-user specification numbering).
const (
	reqGetFeatures         = 1
	reqSetFeatures         = 2
	reqSetOwner            = 3
	reqResetOwner          = 4
	reqSetMemTable         = 5
	reqSetLogBase          = 6
	reqSetLogFD            = 7
	reqSetVringNum         = 8
	reqSetVringAddr        = 9
	reqSetVringBase        = 10
	reqGetVringBase        = 11
	reqSetVringKick        = 12
	reqSetVringCall        = 13
	reqSetVringErr         = 14
	reqGetProtocolFeatures = 15
	reqSetProtocolFeatures = 16
	reqGetQueueNum         = 17
	reqSetVringEnable      = 18
	reqSendRARP            = 19
	reqNetSetMTU           = 20
	reqGetConfig           = 24
	reqSetConfig           = 25
	reqSetStatus           = 39
	reqGetStatus           = 40
)

// Header flags.
const (
	flagVersion   = 0x1
	flagReply     = 0x4
	flagNeedReply = 0x8
)

// Virtio feature bits.
const (
	featNetCsum         = 0
	featNetGuestCsum    = 1
	featNetMTU          = 3
	featNetGuestTSO4    = 7
	featNetGuestTSO6    = 8
	featNetGuestECN     = 9
	featNetHostTSO4     = 11
	featNetHostTSO6     = 12
	featNetHostECN      = 13
	featNetHostUFO      = 14
	featNetMrgRxbuf     = 15
	featNetMQ           = 22
	featRingIndirect    = 28
	featRingEventIdx    = 29
	featProtocolFeature = 30
	featVersion1        = 32
	featInOrder         = 35
)

// Protocol feature bits.
const (
	protoMQ       = 0
	protoReplyAck = 3
	protoMTU      = 4
	protoConfig   = 9
	protoStatus   = 16
)

// offeredFeatures are the virtio features the port offers. The frontend
// may send partial checksums and TCP super-frames (CSUM, HOST_TSO4/6):
// the port completes the checksum of a single frame on receive and keeps a
// super-frame whole (see "Big frames" in docs/architecture.md), so a guest
// need not segment what the switch hands on to a port that takes it whole.
// With GUEST_CSUM, GUEST_TSO4/6 and mergeable buffers the port sends TCP
// super-frames whole too (rxOffload); it never sends a partial checksum
// on a single frame. IN_ORDER costs
// nothing here — both directions always use buffers in the order they were
// made available, a bad chain included — and lets a DPDK frontend take its
// cheaper in-order paths (it recycles descriptors without reading their
// ids back from the used ring).
const offeredFeatures = 1<<featVersion1 | 1<<featNetMrgRxbuf | 1<<featNetMQ |
	1<<featRingIndirect | 1<<featRingEventIdx | 1<<featProtocolFeature | 1<<featInOrder |
	1<<featNetCsum | 1<<featNetHostTSO4 | 1<<featNetHostTSO6 | 1<<featNetHostECN |
	1<<featNetGuestCsum | 1<<featNetGuestTSO4 | 1<<featNetGuestTSO6 | 1<<featNetGuestECN

// rxOffloadFeatures must all be negotiated for the port to send TCP
// super-frames whole: without mergeable buffers a 64 KiB frame would need
// receive chains that large, which guests post only in a mode of their
// own choosing.
const rxOffloadFeatures = 1<<featNetGuestCsum | 1<<featNetGuestTSO4 | 1<<featNetGuestTSO6 | 1<<featNetMrgRxbuf

// rxOffload reports whether features let the port send TCP super-frames
// whole.
func rxOffload(features uint64) bool { return features&rxOffloadFeatures == rxOffloadFeatures }

// offeredProtocol are the protocol features the port offers.
const offeredProtocol = 1<<protoMQ | 1<<protoReplyAck | 1<<protoMTU | 1<<protoStatus

const (
	hdrSize    = 12
	maxPayload = 4096 // far above the largest message we accept (config space: 268)
	maxFDs     = 8    // VHOST_MEMORY_MAX_NREGIONS
	maxRegions = 8
	configSize = 256
)

var le = binary.LittleEndian

// errClose makes the session end instead of replying.
var errClose = errors.New("vhostuser: closing connection")

// message is one received request. Handlers take the descriptors they keep
// by setting their entries to -1; the rest are closed after handling.
type message struct {
	req, flags uint32
	payload    []byte
	fds        []int
}

func (m *message) takeFD(i int) int {
	fd := m.fds[i]
	m.fds[i] = -1
	return fd
}

func (m *message) closeFDs() {
	for i, fd := range m.fds {
		if fd >= 0 {
			unix.Close(fd)
			m.fds[i] = -1
		}
	}
}

// reader reads requests from one connection with buffers it reuses.
type reader struct {
	c       *net.UnixConn
	hdr     [hdrSize]byte
	payload [maxPayload]byte
	oob     []byte
	fds     [maxFDs]int
}

func newReader(c *net.UnixConn) *reader {
	return &reader{c: c, oob: make([]byte, unix.CmsgSpace(maxFDs*4))}
}

// read returns the next request. On error every received descriptor has
// been closed.
func (r *reader) read() (*message, error) {
	n, oobn, flags, _, err := r.c.ReadMsgUnix(r.hdr[:], r.oob)
	m := &message{fds: r.fds[:0]}
	if oobn > 0 {
		if cmsgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn]); perr == nil {
			for i := range cmsgs {
				fds, ferr := unix.ParseUnixRights(&cmsgs[i])
				if ferr != nil {
					continue
				}
				for _, fd := range fds {
					if len(m.fds) < maxFDs {
						m.fds = append(m.fds, fd)
					} else {
						unix.Close(fd)
					}
				}
			}
		}
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err == nil && flags&unix.MSG_CTRUNC != 0 {
		err = errors.New("vhostuser: too many descriptors in a message")
	}
	if err == nil && n < hdrSize {
		_, err = io.ReadFull(r.c, r.hdr[n:])
	}
	if err != nil {
		m.closeFDs()
		return nil, err
	}
	m.req = le.Uint32(r.hdr[0:])
	m.flags = le.Uint32(r.hdr[4:])
	size := le.Uint32(r.hdr[8:])
	if size > maxPayload {
		m.closeFDs()
		return nil, fmt.Errorf("vhostuser: request %d with a %d-byte payload", m.req, size)
	}
	if _, err := io.ReadFull(r.c, r.payload[:size]); err != nil {
		m.closeFDs()
		return nil, err
	}
	m.payload = r.payload[:size]
	return m, nil
}

// vring is the control side's view of one virtqueue.
type vring struct {
	num               int
	desc, avail, used uint64
	addrSet           bool
	base              uint16
	kick, call, err   int
	started           bool // kicked since the last stop (GET_VRING_BASE)
	enabled           bool // SET_VRING_ENABLE
	enableSeen        bool // the frontend sent SET_VRING_ENABLE for it in this session
	kickInEpoll       bool
}

// device is one frontend session's state, owned by the control goroutine.
type device struct {
	p        *Port
	features uint64
	protocol uint64
	status   uint64
	mem      *virtq.Memory
	maps     [][]byte
	vrings   []vring
}

func newDevice(p *Port) *device {
	d := &device{p: p, vrings: make([]vring, len(p.slots))}
	for i := range d.vrings {
		v := &d.vrings[i]
		v.kick, v.call, v.err = -1, -1, -1
	}
	return d
}

// serve runs one session until the connection fails or a request is
// refused without a way to say so, then stops every ring and releases the
// session's memory and descriptors.
func (p *Port) serve(c *net.UnixConn) {
	d := newDevice(p)
	p.connected.Store(true)
	defer func() {
		p.connected.Store(false)
		d.reset()
	}()
	r := newReader(c)
	var out [hdrSize + 8 + configSize + 12]byte
	for {
		m, err := r.read()
		if err != nil {
			if err != io.EOF {
				p.setErr(err)
			}
			return
		}
		reply, herr := d.handle(m)
		m.closeFDs()
		ack := m.flags&flagNeedReply != 0 && d.protocol&(1<<protoReplyAck) != 0
		if herr != nil {
			p.setErr(fmt.Errorf("vhostuser: %s: request %d: %w", p.name, m.req, herr))
			if herr == errClose || hasReply(m.req) || !ack {
				return
			}
			// Refuse through the REPLY_ACK channel and carry on.
			reply = le.AppendUint64(nil, 1)
		} else if reply == nil && ack {
			reply = le.AppendUint64(nil, 0)
		}
		if reply == nil {
			continue
		}
		b := out[:0]
		b = le.AppendUint32(b, m.req)
		b = le.AppendUint32(b, flagVersion|flagReply)
		b = le.AppendUint32(b, uint32(len(reply)))
		b = append(b, reply...)
		if _, err := c.Write(b); err != nil {
			p.setErr(err)
			return
		}
	}
}

// hasReply says whether a request is answered even without REPLY_ACK; a
// failed one cannot be refused in-band, so the session ends.
func hasReply(req uint32) bool {
	switch req {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetQueueNum, reqGetVringBase, reqGetStatus, reqGetConfig:
		return true
	}
	return false
}

func u64(m *message) (uint64, error) {
	if len(m.payload) < 8 {
		return 0, fmt.Errorf("payload of %d bytes, want 8", len(m.payload))
	}
	return le.Uint64(m.payload), nil
}

// vringState decodes a vhost_vring_state (index, num).
func (d *device) vringState(m *message) (int, uint32, error) {
	if len(m.payload) < 8 {
		return 0, 0, fmt.Errorf("payload of %d bytes, want 8", len(m.payload))
	}
	i := le.Uint32(m.payload)
	if i >= uint32(len(d.vrings)) {
		return 0, 0, fmt.Errorf("virtqueue %d out of range (%d queue pairs)", i, len(d.vrings)/2)
	}
	return int(i), le.Uint32(m.payload[4:]), nil
}

// handle applies one request. It returns the reply payload for requests
// that have one.
func (d *device) handle(m *message) ([]byte, error) {
	switch m.req {
	case reqGetFeatures:
		return le.AppendUint64(nil, offeredFeatures), nil
	case reqSetFeatures:
		f, err := u64(m)
		if err != nil {
			return nil, err
		}
		if extra := f &^ offeredFeatures; extra != 0 {
			return nil, fmt.Errorf("features %#x were not offered", extra)
		}
		d.stopAll()
		d.features = f
		d.p.features.Store(f)
		return nil, d.startAll()
	case reqSetOwner:
		return nil, nil
	case reqResetOwner:
		d.reset()
		return nil, nil
	case reqGetProtocolFeatures:
		return le.AppendUint64(nil, offeredProtocol), nil
	case reqSetProtocolFeatures:
		f, err := u64(m)
		if err != nil {
			return nil, err
		}
		if extra := f &^ offeredProtocol; extra != 0 {
			return nil, fmt.Errorf("protocol features %#x were not offered", extra)
		}
		d.protocol = f
		return nil, nil
	case reqGetQueueNum:
		return le.AppendUint64(nil, uint64(len(d.vrings)/2)), nil
	case reqSetMemTable:
		return nil, d.setMemTable(m)
	case reqSetVringNum:
		i, num, err := d.vringState(m)
		if err != nil {
			return nil, err
		}
		if num == 0 || num > virtq.MaxSize || num&(num-1) != 0 {
			return nil, fmt.Errorf("ring size %d", num)
		}
		d.stop(i)
		d.vrings[i].num = int(num)
		return nil, d.start(i)
	case reqSetVringAddr:
		if len(m.payload) < 40 {
			return nil, fmt.Errorf("vring address of %d bytes", len(m.payload))
		}
		i := le.Uint32(m.payload)
		if i >= uint32(len(d.vrings)) {
			return nil, fmt.Errorf("virtqueue %d out of range", i)
		}
		// vhost_vring_addr: index, flags, desc, used, avail, log.
		desc, used, avail := le.Uint64(m.payload[8:]), le.Uint64(m.payload[16:]), le.Uint64(m.payload[24:])
		v := &d.vrings[i]
		if d.mem != nil && v.num > 0 {
			// Refused now, while the ring is still as it was; a table
			// or size that comes later is checked when the ring starts.
			if err := virtq.CheckRings(d.mem, v.num, desc, avail, used); err != nil {
				return nil, err
			}
		}
		d.stop(int(i))
		v.desc, v.used, v.avail = desc, used, avail
		v.addrSet = true
		return nil, d.start(int(i))
	case reqSetVringBase:
		i, num, err := d.vringState(m)
		if err != nil {
			return nil, err
		}
		d.stop(i)
		d.vrings[i].base = uint16(num)
		return nil, d.start(i)
	case reqGetVringBase:
		i, _, err := d.vringState(m)
		if err != nil {
			return nil, err
		}
		d.stop(i)
		v := &d.vrings[i]
		v.started = false
		closeFD(&v.kick)
		out := le.AppendUint32(nil, uint32(i))
		return le.AppendUint32(out, uint32(v.base)), nil
	case reqSetVringKick, reqSetVringCall, reqSetVringErr:
		return nil, d.setVringFD(m)
	case reqSetVringEnable:
		i, num, err := d.vringState(m)
		if err != nil {
			return nil, err
		}
		d.stop(i)
		d.vrings[i].enabled = num != 0
		d.vrings[i].enableSeen = true
		return nil, d.start(i)
	case reqNetSetMTU:
		mtu, err := u64(m)
		if err != nil {
			return nil, err
		}
		if mtu < 68 || mtu > 65535 {
			return nil, fmt.Errorf("MTU %d", mtu)
		}
		d.p.mtu.Store(int32(mtu))
		return nil, nil
	case reqSetStatus:
		s, err := u64(m)
		if err != nil {
			return nil, err
		}
		return nil, d.setStatus(s & 0xff)
	case reqGetStatus:
		return le.AppendUint64(nil, d.status), nil
	case reqGetConfig:
		return d.getConfig(m)
	case reqSetConfig, reqSendRARP:
		return nil, nil // nothing in the config space is writable; RARP is the guest's business
	case reqSetLogBase, reqSetLogFD:
		return nil, errors.New("dirty-page logging was not offered")
	}
	return nil, fmt.Errorf("unsupported request %d", m.req)
}

// statusDriverOK is the virtio device status bit of a driver that is ready.
const statusDriverOK = 4

// setStatus records the device status. A frontend that reaches DRIVER_OK
// without ever having sent SET_VRING_ENABLE for a ring it set up gets that
// ring enabled: DPDK's virtio-user (22.11) in server mode, when a backend
// reconnects, replays the whole setup of a one-queue-pair device except
// the enables, and would otherwise never pass traffic again. A ring the
// frontend did enable or disable explicitly keeps its state.
func (d *device) setStatus(s uint64) error {
	old := d.status
	d.status = s
	if s == 0 { // reset: the next setup starts from scratch
		for i := range d.vrings {
			d.vrings[i].enableSeen = false
		}
		return nil
	}
	if s&statusDriverOK == 0 || old&statusDriverOK != 0 {
		return nil
	}
	var errs []error
	for i := range d.vrings {
		if v := &d.vrings[i]; !v.enableSeen && !v.enabled {
			v.enabled = true
			errs = append(errs, d.start(i))
		}
	}
	return errors.Join(errs...)
}

// getConfig returns the virtio-net config space (MAC zero, link up, the
// queue pairs and the MTU) for the range asked.
func (d *device) getConfig(m *message) ([]byte, error) {
	if len(m.payload) < 12 {
		return nil, errClose
	}
	off, size := le.Uint32(m.payload), le.Uint32(m.payload[4:])
	if off > configSize || size > configSize-off {
		return nil, errClose
	}
	var cfg [configSize]byte
	le.PutUint16(cfg[6:], 1) // VIRTIO_NET_S_LINK_UP
	le.PutUint16(cfg[8:], uint16(len(d.vrings)/2))
	le.PutUint16(cfg[10:], uint16(d.p.mtu.Load()))
	out := append([]byte(nil), m.payload[:12]...)
	return append(out, cfg[off:off+size]...), nil
}

func closeFD(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// setVringFD handles SET_VRING_KICK/CALL/ERR: index in the low byte, bit 8
// set when no descriptor comes with the message.
func (d *device) setVringFD(m *message) error {
	v64, err := u64(m)
	if err != nil {
		return err
	}
	i := int(v64 & 0xff)
	if i >= len(d.vrings) {
		return fmt.Errorf("virtqueue %d out of range", i)
	}
	noFD := v64&0x100 != 0
	fd := -1
	switch {
	case noFD && len(m.fds) != 0, !noFD && len(m.fds) != 1:
		return fmt.Errorf("%d descriptors with flags %#x", len(m.fds), v64)
	case !noFD:
		fd = m.takeFD(0)
		// The PMD must never block on it: a drained kick eventfd, or
		// a call descriptor the frontend does not read.
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return err
		}
	}
	v := &d.vrings[i]
	switch m.req {
	case reqSetVringErr:
		closeFD(&v.err)
		v.err = fd
		return nil
	case reqSetVringKick:
		d.stop(i)
		closeFD(&v.kick)
		v.kick = fd
		v.started = true
	case reqSetVringCall:
		d.stop(i)
		closeFD(&v.call)
		v.call = fd
	}
	return d.start(i)
}

// setMemTable maps the frontend's regions, then swaps them in with every
// ring stopped, and unmaps the old ones.
func (d *device) setMemTable(m *message) error {
	p := m.payload
	if len(p) < 8 {
		return fmt.Errorf("memory table of %d bytes", len(p))
	}
	n := int(le.Uint32(p))
	if n == 0 || n > maxRegions || len(p) < 8+32*n {
		return fmt.Errorf("memory table with %d regions in %d bytes", n, len(p))
	}
	if len(m.fds) != n {
		return fmt.Errorf("memory table with %d regions and %d descriptors", n, len(m.fds))
	}
	regions := make([]virtq.Region, 0, n)
	table := make([]memRegion, 0, n)
	maps := make([][]byte, 0, n)
	fail := func(err error) error {
		for _, b := range maps {
			unix.Munmap(b)
		}
		return err
	}
	for i := 0; i < n; i++ {
		r := p[8+32*i:]
		gpa, size, uva, off := le.Uint64(r), le.Uint64(r[8:]), le.Uint64(r[16:]), le.Uint64(r[24:])
		if size == 0 || gpa+size < gpa || uva+size < uva || off+size < off || size > 1<<46 {
			return fail(fmt.Errorf("region %d: address %#x size %#x offset %#x", i, gpa, size, off))
		}
		data, mapping, err := mapRegion(m.fds[i], size, off)
		if err != nil {
			return fail(fmt.Errorf("region %d: %w", i, err))
		}
		maps = append(maps, mapping)
		regions = append(regions, virtq.Region{GuestAddr: gpa, UserAddr: uva, Data: data})
		table = append(table, memRegion{GuestAddr: gpa, Size: size, UserAddr: uva, Offset: off})
	}
	d.p.memTable.Store(&table)
	d.stopAll()
	d.unmap()
	d.mem = virtq.NewMemory(regions)
	d.maps = maps
	return d.startAll()
}

// mapRegion maps size bytes at offset off of fd. It refuses a file shorter
// than the region: touching a mapping past the end of its file faults.
func mapRegion(fd int, size, off uint64) (data, mapping []byte, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) < off+size {
		return nil, nil, fmt.Errorf("file of mode %#o and %d bytes cannot back %d bytes at %d", st.Mode, st.Size, size, off)
	}
	page := uint64(os.Getpagesize())
	start := off &^ (page - 1)
	length := size + off - start
	if length > uint64(int(^uint(0)>>1)) {
		return nil, nil, errors.New("region too large")
	}
	mapping, err = unix.Mmap(fd, int64(start), int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil && start != 0 {
		// Huge-page files need huge-page-aligned offsets: map from 0.
		start, length = 0, size+off
		mapping, err = unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		return nil, nil, err
	}
	return mapping[off-start : off-start+size : off-start+size], mapping, nil
}

func (d *device) unmap() {
	for _, b := range d.maps {
		unix.Munmap(b)
	}
	d.maps, d.mem = nil, nil
}

// ready says whether virtqueue i has everything it needs to run.
func (d *device) ready(i int) bool {
	v := &d.vrings[i]
	enabled := v.enabled || d.features&(1<<featProtocolFeature) == 0
	return d.mem != nil && v.num > 0 && v.addrSet && v.started && enabled
}

// start publishes virtqueue i to the PMDs if it is ready.
func (d *device) start(i int) error {
	if !d.ready(i) || d.p.slots[i].q.Load() != nil {
		return nil
	}
	v := &d.vrings[i]
	hdr := 10
	if d.features&(1<<featVersion1|1<<featNetMrgRxbuf) != 0 {
		hdr = 12
	}
	q, err := virtq.New(virtq.Config{
		Mem:       d.mem,
		Size:      v.num,
		DescAddr:  v.desc,
		AvailAddr: v.avail,
		UsedAddr:  v.used,
		LastAvail: v.base,
		HdrLen:    hdr,
		Mergeable: d.features&(1<<featNetMrgRxbuf) != 0,
		Indirect:  d.features&(1<<featRingIndirect) != 0,
		EventIdx:  d.features&(1<<featRingEventIdx) != 0,
		TxOffload: d.features&(1<<featNetCsum) != 0,
		RxOffload: rxOffload(d.features),
		RxECN:     d.features&(1<<featNetGuestECN) != 0,
		CallFD:    v.call,
		KickFD:    v.kick,
	})
	if err != nil {
		return err
	}
	// The PMD never waits for receive buffers: no kicks on them. A
	// transmit ring starts armed, as the PMD may be asleep; its first
	// frames disarm it (Port.ArmRx).
	q.SetKickNotify(i%2 == 1)
	if i%2 == 1 && v.kick >= 0 {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(v.kick)}
		if err := unix.EpollCtl(d.p.epfd[i/2], unix.EPOLL_CTL_ADD, v.kick, &ev); err == nil {
			v.kickInEpoll = true
		}
	}
	d.p.slots[i].q.Store(q)
	return nil
}

// stop takes virtqueue i away from the PMDs and remembers where it was.
func (d *device) stop(i int) {
	v := &d.vrings[i]
	if q := d.p.slots[i].take(); q != nil {
		v.base = q.LastAvail()
	}
	if v.kickInEpoll {
		unix.EpollCtl(d.p.epfd[i/2], unix.EPOLL_CTL_DEL, v.kick, nil)
		v.kickInEpoll = false
	}
}

func (d *device) stopAll() {
	for i := range d.vrings {
		d.stop(i)
	}
}

func (d *device) startAll() error {
	var errs []error
	for i := range d.vrings {
		errs = append(errs, d.start(i))
	}
	return errors.Join(errs...)
}

// reset stops every ring, then releases memory and descriptors: the state
// of a fresh session.
func (d *device) reset() {
	d.stopAll()
	d.unmap()
	for i := range d.vrings {
		v := &d.vrings[i]
		closeFD(&v.kick)
		closeFD(&v.call)
		closeFD(&v.err)
		*v = vring{kick: -1, call: -1, err: -1}
	}
	d.features, d.protocol, d.status = 0, 0, 0
	d.p.features.Store(0)
}
