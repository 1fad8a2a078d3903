package ofpwire

import (
	"github.com/netrack/openflow/ofp"
)

// NX sample subtypes: sample (probability and the IPFIX ids), sample2
// (adds the sampling port), sample3 (adds the direction).
const (
	nxastSample  = 29
	nxastSample2 = 38
	nxastSample3 = 41
)

// Sample directions (sample3).
const (
	SampleDefault = 0
	SampleIngress = 1
	SampleEgress  = 2
)

// SamplePortNone is SamplingPort when the action names none (OpenFlow
// 1.0's OFPP_NONE, as the action carries it).
const SamplePortNone = 0xffff

// ActionSample asks for a packet sample to go to an IPFIX collector set
// (Open vSwitch's sample action, which OVN emits for ACL sampling). This
// switch has no IPFIX exporter: the action is accepted, kept, printed and
// sent back in the subtype it came in, and does nothing to the packet
// (the flow's own counters count what reached it). Subtype is the wire
// form (sample, sample2 or sample3).
type ActionSample struct {
	Subtype                               uint16
	Probability                           uint16
	CollectorSetID, ObsDomainID, ObsPoint uint32
	SamplingPort                          uint16
	Direction                             uint8
}

// ActionType implements Action.
func (*ActionSample) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionSample) appendTo(b []byte) ([]byte, error) {
	st := a.Subtype
	switch {
	case st == nxastSample3 || a.Direction != SampleDefault:
		st = nxastSample3
	case st == nxastSample2 || a.SamplingPort != SamplePortNone:
		st = nxastSample2
	default:
		st = nxastSample
	}
	n := 32
	if st == nxastSample {
		n = 24
	}
	b = nxHeader(b, n, st)
	b = be.AppendUint16(b, a.Probability)
	b = be.AppendUint32(b, a.CollectorSetID)
	b = be.AppendUint32(b, a.ObsDomainID)
	b = be.AppendUint32(b, a.ObsPoint)
	if st == nxastSample {
		return b, nil
	}
	b = be.AppendUint16(b, a.SamplingPort)
	b = append(b, a.Direction)
	return appendZeros(b, 5), nil
}

// parseNXSample decodes the sample subtypes (a is the whole action); ok
// false for others. As in Open vSwitch: probability 0, a direction
// unknown or padding not zero are refused.
func parseNXSample(st uint16, a []byte) (Action, bool, error) {
	switch st {
	case nxastSample, nxastSample2, nxastSample3:
	default:
		return nil, false, nil
	}
	want := 32
	if st == nxastSample {
		want = 24
	}
	if len(a) != want {
		return nil, true, errActionLen
	}
	s := &ActionSample{Subtype: st, Probability: be.Uint16(a[10:]), CollectorSetID: be.Uint32(a[12:]),
		ObsDomainID: be.Uint32(a[16:]), ObsPoint: be.Uint32(a[20:]), SamplingPort: SamplePortNone}
	if st != nxastSample {
		s.SamplingPort = be.Uint16(a[24:])
	}
	if st == nxastSample3 {
		s.Direction = a[26]
		if s.Direction > SampleEgress {
			return nil, true, errActionArg
		}
		for _, p := range a[27:] {
			if p != 0 {
				return nil, true, errActionArg
			}
		}
	}
	if s.Probability == 0 {
		return nil, true, errActionArg
	}
	return s, true, nil
}
