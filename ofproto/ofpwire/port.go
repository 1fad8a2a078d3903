package ofpwire

import (
	"net"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

const (
	portLen     = 64
	portNameLen = 16
)

// Port is an ofp_port. netrack's struct is used as is; its codec is not,
// because it writes a short record when HWAddr is not 6 bytes long and keeps
// the name's NUL padding.
type Port = ofp.Port

func appendHWAddr(b []byte, a net.HardwareAddr) []byte {
	var mac [6]byte
	copy(mac[:], a)
	return append(b, mac[:]...)
}

func appendPort(b []byte, p *Port) []byte {
	b = be.AppendUint32(b, uint32(p.PortNo))
	b = appendZeros(b, 4)
	b = appendZeros(appendHWAddr(b, p.HWAddr), 2)
	b = appendCString(b, p.Name, portNameLen)
	for _, v := range [...]uint32{uint32(p.Config), uint32(p.State), uint32(p.Curr),
		uint32(p.Advertised), uint32(p.Supported), uint32(p.Peer), p.CurrSpeed, p.MaxSpeed} {
		b = be.AppendUint32(b, v)
	}
	return b
}

// parsePort decodes exactly portLen bytes.
func parsePort(b []byte) Port {
	return Port{
		PortNo:     ofp.PortNo(be.Uint32(b)),
		HWAddr:     net.HardwareAddr(cloneBytes(b[8:14])),
		Name:       cString(b[16:32]),
		Config:     ofp.PortConfig(be.Uint32(b[32:])),
		State:      ofp.PortState(be.Uint32(b[36:])),
		Curr:       ofp.PortFeature(be.Uint32(b[40:])),
		Advertised: ofp.PortFeature(be.Uint32(b[44:])),
		Supported:  ofp.PortFeature(be.Uint32(b[48:])),
		Peer:       ofp.PortFeature(be.Uint32(b[52:])),
		CurrSpeed:  be.Uint32(b[56:]),
		MaxSpeed:   be.Uint32(b[60:]),
	}
}

// PortStatus is OFPT_PORT_STATUS.
type PortStatus struct {
	Reason ofp.PortReason
	Port   Port
}

// MsgType implements Message.
func (*PortStatus) MsgType() openflow.Type { return openflow.TypePortStatus }

func (p *PortStatus) appendBody(b []byte) ([]byte, error) {
	b = appendZeros(append(b, byte(p.Reason)), 7)
	return appendPort(b, &p.Port), nil
}

func (p *PortStatus) decodeBody(b []byte) error {
	if len(b) != 8+portLen {
		return errBadLen
	}
	*p = PortStatus{Reason: ofp.PortReason(b[0]), Port: parsePort(b[8:])}
	return nil
}

// PortMod is OFPT_PORT_MOD (netrack's struct; its ReadFrom reads no address
// into a nil HWAddr and then misparses the rest, so the codec is ours).
type PortMod ofp.PortMod

// MsgType implements Message.
func (*PortMod) MsgType() openflow.Type { return openflow.TypePortMod }

func (p *PortMod) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, uint32(p.PortNo))
	b = appendZeros(b, 4)
	b = appendZeros(appendHWAddr(b, p.HWAddr), 2)
	b = be.AppendUint32(b, uint32(p.Config))
	b = be.AppendUint32(b, uint32(p.Mask))
	b = be.AppendUint32(b, uint32(p.Advertise))
	return appendZeros(b, 4), nil
}

func (p *PortMod) decodeBody(b []byte) error {
	if len(b) != 32 {
		return errBadLen
	}
	*p = PortMod{
		PortNo:    ofp.PortNo(be.Uint32(b)),
		HWAddr:    net.HardwareAddr(cloneBytes(b[8:14])),
		Config:    ofp.PortConfig(be.Uint32(b[16:])),
		Mask:      ofp.PortConfig(be.Uint32(b[20:])),
		Advertise: ofp.PortFeature(be.Uint32(b[24:])),
	}
	return nil
}
