package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// parseSample reads sample(probability=N,collector_set_id=N,
// obs_domain_id=N,obs_point_id=N[,sampling_port=PORT][,ingress|egress]),
// as ovs-ofctl does: probability required and not 0, the ids 0 unless
// given.
func parseSample(arg string, ports portResolver) (*ofpwire.ActionSample, error) {
	a := &ofpwire.ActionSample{SamplingPort: ofpwire.SamplePortNone}
	toks, err := splitTop(arg)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	for _, tok := range toks {
		name, val, _ := strings.Cut(tok, "=")
		var bits int
		var dst *uint32
		switch name {
		case "ingress":
			a.Direction = ofpwire.SampleIngress
			continue
		case "egress":
			a.Direction = ofpwire.SampleEgress
			continue
		case "sampling_port":
			p, err := parsePort(val, ports)
			if err != nil {
				return nil, fmt.Errorf("sample: %w", err)
			}
			// The action carries an OpenFlow 1.0 port number.
			if p > 0xff00 && p < 0xffffff00 {
				return nil, fmt.Errorf("sample: sampling_port %s out of range", val)
			}
			a.SamplingPort = uint16(p)
			continue
		case "probability":
			v, err := parseNum("sample probability", val, 16)
			if err != nil {
				return nil, err
			}
			a.Probability = uint16(v)
			continue
		case "collector_set_id":
			bits, dst = 32, &a.CollectorSetID
		case "obs_domain_id":
			bits, dst = 32, &a.ObsDomainID
		case "obs_point_id":
			bits, dst = 32, &a.ObsPoint
		default:
			return nil, fmt.Errorf("sample: unknown argument %q", name)
		}
		v, err := parseNum("sample "+name, val, bits)
		if err != nil {
			return nil, err
		}
		*dst = uint32(v)
	}
	if a.Probability == 0 {
		return nil, fmt.Errorf("sample: non-zero probability required")
	}
	return a, nil
}

// formatSample prints sample as Open vSwitch does.
func formatSample(a *ofpwire.ActionSample) string {
	s := "sample(probability=" + strconv.Itoa(int(a.Probability)) +
		",collector_set_id=" + strconv.FormatUint(uint64(a.CollectorSetID), 10) +
		",obs_domain_id=" + strconv.FormatUint(uint64(a.ObsDomainID), 10) +
		",obs_point_id=" + strconv.FormatUint(uint64(a.ObsPoint), 10)
	if a.SamplingPort != ofpwire.SamplePortNone {
		p := ofpwire.PortNo(a.SamplingPort)
		if a.SamplingPort >= 0xff00 {
			p = ofpwire.PortNo(0xffff0000 | uint32(a.SamplingPort))
		}
		s += ",sampling_port=" + portName(p)
	}
	switch a.Direction {
	case ofpwire.SampleIngress:
		s += ",ingress"
	case ofpwire.SampleEgress:
		s += ",egress"
	}
	return s + ")"
}
