package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// QueueGetConfigRequest is OFPT_QUEUE_GET_CONFIG_REQUEST.
type QueueGetConfigRequest ofp.QueueGetConfigRequest

// MsgType implements Message.
func (*QueueGetConfigRequest) MsgType() openflow.Type {
	return openflow.TypeQueueGetConfigRequest
}

func (q *QueueGetConfigRequest) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.QueueGetConfigRequest)(q)), nil
}
func (q *QueueGetConfigRequest) decodeBody(b []byte) error {
	return readFixed(b, 8, (*ofp.QueueGetConfigRequest)(q), errBadLen)
}

// QueueProp is an ofp_queue_prop_*: Rate (tenths of a percent) for MIN_RATE
// and MAX_RATE, Experimenter and Data for EXPERIMENTER.
type QueueProp struct {
	Type         ofp.QueuePropType
	Rate         uint16
	Experimenter uint32
	Data         []byte
}

// PacketQueue is an ofp_packet_queue.
type PacketQueue struct {
	QueueID    ofp.Queue
	Port       ofp.PortNo
	Properties []QueueProp
}

// QueueGetConfigReply is OFPT_QUEUE_GET_CONFIG_REPLY.
type QueueGetConfigReply struct {
	Port   ofp.PortNo
	Queues []PacketQueue
}

// MsgType implements Message.
func (*QueueGetConfigReply) MsgType() openflow.Type { return openflow.TypeQueueGetConfigReply }

func (q *QueueGetConfigReply) appendBody(b []byte) ([]byte, error) {
	b = appendZeros(be.AppendUint32(b, uint32(q.Port)), 4)
	for _, pq := range q.Queues {
		start := len(b)
		b = be.AppendUint32(b, uint32(pq.QueueID))
		b = be.AppendUint32(b, uint32(pq.Port))
		b = appendZeros(b, 8)
		for _, p := range pq.Properties {
			n := 16
			if p.Type == ofp.QueuePropTypeExperimenter {
				n = roundUp8(16 + len(p.Data))
			}
			b = be.AppendUint16(b, uint16(p.Type))
			b = be.AppendUint16(b, uint16(n))
			b = appendZeros(b, 4)
			if p.Type == ofp.QueuePropTypeExperimenter {
				b = appendZeros(be.AppendUint32(b, p.Experimenter), 4)
				b = appendZeros(append(b, p.Data...), n-16-len(p.Data))
			} else {
				b = appendZeros(be.AppendUint16(b, p.Rate), 6)
			}
		}
		if len(b)-start > 0xffff {
			return b, fmt.Errorf("ofpwire: queue description too long")
		}
		putLen16(b, start+8, len(b)-start)
	}
	return b, nil
}

func (q *QueueGetConfigReply) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	r := QueueGetConfigReply{Port: ofp.PortNo(be.Uint32(b))}
	for b = b[8:]; len(b) > 0; {
		if len(b) < 16 {
			return errBadLen
		}
		n := int(be.Uint16(b[8:]))
		if n < 16 || n > len(b) {
			return errBadLen
		}
		pq := PacketQueue{QueueID: ofp.Queue(be.Uint32(b)), Port: ofp.PortNo(be.Uint32(b[4:]))}
		for p := b[16:n]; len(p) > 0; {
			if len(p) < 16 {
				return errBadLen
			}
			t, pn := ofp.QueuePropType(be.Uint16(p)), int(be.Uint16(p[2:]))
			if pn < 16 || pn%8 != 0 || pn > len(p) {
				return errBadLen
			}
			prop := QueueProp{Type: t}
			switch t {
			case ofp.QueuePropTypeMinRate, ofp.QueuePropTypeMaxRate:
				if pn != 16 {
					return errBadLen
				}
				prop.Rate = be.Uint16(p[8:])
			case ofp.QueuePropTypeExperimenter:
				prop.Experimenter = be.Uint32(p[8:])
				prop.Data = cloneBytes(p[16:pn])
			default:
				return errBadLen
			}
			pq.Properties = append(pq.Properties, prop)
			p = p[pn:]
		}
		r.Queues = append(r.Queues, pq)
		b = b[n:]
	}
	*q = r
	return nil
}
