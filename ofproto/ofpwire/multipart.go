package ofpwire

import (
	"fmt"
	"io"
	"slices"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Multipart flags.
const (
	MultipartRequestMore = uint16(ofp.MultipartRequestMode) // OFPMPF_REQ_MORE
	MultipartReplyMore   = uint16(ofp.MultipartReplyMode)   // OFPMPF_REPLY_MORE
)

const multipartHeaderLen = HeaderLen + 8

// MultipartRequest is OFPT_MULTIPART_REQUEST.
type MultipartRequest struct {
	Flags uint16
	Body  MultipartRequestBody
}

// MultipartRequestBody is the type-specific part of a multipart request.
type MultipartRequestBody interface {
	// MultipartType is the OFPMP_* code of the body.
	MultipartType() ofp.MultipartType
	appendReq(b []byte) ([]byte, error)
	decodeReq(b []byte) error
}

// MsgType implements Message.
func (*MultipartRequest) MsgType() openflow.Type { return openflow.TypeMultipartRequest }

func (m *MultipartRequest) appendBody(b []byte) ([]byte, error) {
	if m.Body == nil {
		return b, fmt.Errorf("ofpwire: multipart request without body")
	}
	b = be.AppendUint16(b, uint16(m.Body.MultipartType()))
	b = appendZeros(be.AppendUint16(b, m.Flags), 4)
	return m.Body.appendReq(b)
}

func newMultipartRequestBody(t ofp.MultipartType) MultipartRequestBody {
	switch t {
	case ofp.MultipartTypeDescription:
		return new(DescRequest)
	case ofp.MultipartTypeFlow:
		return new(FlowStatsRequest)
	case ofp.MultipartTypeAggregate:
		return new(AggregateStatsRequest)
	case ofp.MultipartTypeTable:
		return new(TableStatsRequest)
	case ofp.MultipartTypePortStats:
		return new(PortStatsRequest)
	case ofp.MultipartTypeQueue:
		return new(QueueStatsRequest)
	case ofp.MultipartTypeGroup:
		return new(GroupStatsRequest)
	case ofp.MultipartTypeGroupDescription:
		return new(GroupDescRequest)
	case ofp.MultipartTypeGroupFeatures:
		return new(GroupFeaturesRequest)
	case ofp.MultipartTypeMeter:
		return new(MeterStatsRequest)
	case ofp.MultipartTypeMeterConfig:
		return new(MeterConfigRequest)
	case ofp.MultipartTypeMeterFeatures:
		return new(MeterFeaturesRequest)
	case ofp.MultipartTypeTableFeatures:
		return new(TableFeaturesRequest)
	case ofp.MultipartTypePortDescription:
		return new(PortDescRequest)
	case ofp.MultipartTypeExperimenter:
		return new(ExperimenterMultipart)
	}
	return nil
}

func (m *MultipartRequest) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	body := newMultipartRequestBody(ofp.MultipartType(be.Uint16(b)))
	if body == nil {
		return errBadMultipart
	}
	if err := body.decodeReq(b[8:]); err != nil {
		return err
	}
	*m = MultipartRequest{Flags: be.Uint16(b[2:]), Body: body}
	return nil
}

// MultipartReply is OFPT_MULTIPART_REPLY. Encode splits a body too large for
// one message; Merge joins the parts on the receiving side.
type MultipartReply struct {
	Flags uint16
	Body  MultipartReplyBody
}

// MultipartReplyBody is the type-specific part of a multipart reply.
type MultipartReplyBody interface {
	// MultipartType is the OFPMP_* code of the body.
	MultipartType() ofp.MultipartType
	// appendItems appends the body and the end offset of every item in it,
	// which are the places a long reply may be cut.
	appendItems(b []byte, ends []int) ([]byte, []int, error)
	decodeRep(b []byte) error
	// merge appends the items of o (same concrete type); false if the body
	// is a single structure that cannot be continued.
	merge(o MultipartReplyBody) bool
}

// MsgType implements Message.
func (*MultipartReply) MsgType() openflow.Type { return openflow.TypeMultipartReply }

// More reports whether further parts of this reply follow.
func (m *MultipartReply) More() bool { return m.Flags&MultipartReplyMore != 0 }

// Merge appends the items of next, a later part of the same reply, and
// takes over its flags.
func (m *MultipartReply) Merge(next *MultipartReply) error {
	if m.Body == nil || next.Body == nil || m.Body.MultipartType() != next.Body.MultipartType() ||
		!m.Body.merge(next.Body) {
		return fmt.Errorf("ofpwire: cannot merge multipart replies")
	}
	m.Flags = next.Flags
	return nil
}

func (m *MultipartReply) appendBody(b []byte) ([]byte, error) {
	if m.Body == nil {
		return b, fmt.Errorf("ofpwire: multipart reply without body")
	}
	b = be.AppendUint16(b, uint16(m.Body.MultipartType()))
	b = appendZeros(be.AppendUint16(b, m.Flags), 4)
	b, _, err := m.Body.appendItems(b, nil)
	return b, err
}

// encodeSplit encodes the reply as messages of at most max bytes, cutting
// only between items.
func (m *MultipartReply) encodeSplit(xid uint32, max int) ([]byte, error) {
	return m.encodeSplitIn(Version, xid, max)
}

// encodeSplitIn is encodeSplit in version v: each item is rewritten into
// v's layout before the cut, so that the cut respects max in v.
func (m *MultipartReply) encodeSplitIn(v uint8, xid uint32, max int) ([]byte, error) {
	if m.Body == nil {
		return nil, fmt.Errorf("ofpwire: multipart reply without body")
	}
	items, ends, err := m.Body.appendItems(nil, nil)
	if err != nil {
		return nil, err
	}
	if v != Version {
		items, ends = downgradeItems(v, uint16(m.Body.MultipartType()), items, ends)
	}
	if g, ok := m.Body.(*GroupDescReply); ok && v >= Version15 {
		stampBucketIDs15(items, ends, g.Groups)
		if items, ends, err = appendGroupProps15(items, ends, g.Groups); err != nil {
			return nil, err
		}
	}
	// 1.0 calls them stats replies, type 17, with a 4-byte header.
	hdrLen, typ, pad := multipartHeaderLen, byte(openflow.TypeMultipartReply), 4
	if v == Version10 {
		hdrLen, typ, pad = HeaderLen+4, 17, 0
	}
	room := max - hdrLen
	var out []byte
	start, k := 0, 0
	for {
		end := start
		for k < len(ends) && ends[k]-start <= room {
			end = ends[k]
			k++
		}
		if end == start && k < len(ends) {
			return nil, fmt.Errorf("ofpwire: multipart item of %d bytes does not fit a message", ends[k]-start)
		}
		if end == start && len(items) > start {
			end = len(items) // trailing bytes of a body without items (never for our types)
		}
		flags := m.Flags
		if k < len(ends) {
			flags |= MultipartReplyMore
		}
		n := hdrLen + end - start
		out = append(out, v, typ, byte(n>>8), byte(n))
		out = be.AppendUint32(out, xid)
		out = be.AppendUint16(out, uint16(m.Body.MultipartType()))
		out = appendZeros(be.AppendUint16(out, flags), pad)
		out = append(out, items[start:end]...)
		start = end
		if k >= len(ends) {
			return out, nil
		}
	}
}

func newMultipartReplyBody(t ofp.MultipartType) MultipartReplyBody {
	switch t {
	case ofp.MultipartTypeDescription:
		return new(DescReply)
	case ofp.MultipartTypeFlow:
		return new(FlowStatsReply)
	case ofp.MultipartTypeAggregate:
		return new(AggregateStatsReply)
	case ofp.MultipartTypeTable:
		return new(TableStatsReply)
	case ofp.MultipartTypePortStats:
		return new(PortStatsReply)
	case ofp.MultipartTypeQueue:
		return new(QueueStatsReply)
	case ofp.MultipartTypeGroup:
		return new(GroupStatsReply)
	case ofp.MultipartTypeGroupDescription:
		return new(GroupDescReply)
	case ofp.MultipartTypeGroupFeatures:
		return new(GroupFeaturesReply)
	case ofp.MultipartTypeMeter:
		return new(MeterStatsReply)
	case ofp.MultipartTypeMeterConfig:
		return new(MeterConfigReply)
	case ofp.MultipartTypeMeterFeatures:
		return new(MeterFeaturesReply)
	case ofp.MultipartTypeTableFeatures:
		return new(TableFeaturesReply)
	case ofp.MultipartTypePortDescription:
		return new(PortDescReply)
	case ofp.MultipartTypeExperimenter:
		return new(ExperimenterMultipart)
	}
	return nil
}

func (m *MultipartReply) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	body := newMultipartReplyBody(ofp.MultipartType(be.Uint16(b)))
	if body == nil {
		return errBadMultipart
	}
	if err := body.decodeRep(b[8:]); err != nil {
		return err
	}
	*m = MultipartReply{Flags: be.Uint16(b[2:]), Body: body}
	return nil
}

// ---- request bodies without content ----

// DescRequest is an OFPMP_DESC request.
type DescRequest struct{}

// TableStatsRequest is an OFPMP_TABLE request.
type TableStatsRequest struct{}

// GroupDescRequest is an OFPMP_GROUP_DESC request.
type GroupDescRequest struct{}

// GroupFeaturesRequest is an OFPMP_GROUP_FEATURES request.
type GroupFeaturesRequest struct{}

// MeterFeaturesRequest is an OFPMP_METER_FEATURES request.
type MeterFeaturesRequest struct{}

// PortDescRequest is an OFPMP_PORT_DESC request.
type PortDescRequest struct{}

// MultipartType implements MultipartRequestBody.
func (*DescRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeDescription }

// MultipartType implements MultipartRequestBody.
func (*TableStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeTable }

// MultipartType implements MultipartRequestBody.
func (*GroupDescRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeGroupDescription
}

// MultipartType implements MultipartRequestBody.
func (*GroupFeaturesRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeGroupFeatures
}

// MultipartType implements MultipartRequestBody.
func (*MeterFeaturesRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeMeterFeatures
}

// MultipartType implements MultipartRequestBody.
func (*PortDescRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypePortDescription
}

func (*DescRequest) appendReq(b []byte) ([]byte, error)          { return b, nil }
func (*DescRequest) decodeReq(b []byte) error                    { return expectEmpty(b) }
func (*TableStatsRequest) appendReq(b []byte) ([]byte, error)    { return b, nil }
func (*TableStatsRequest) decodeReq(b []byte) error              { return expectEmpty(b) }
func (*GroupDescRequest) appendReq(b []byte) ([]byte, error)     { return b, nil }
func (*GroupDescRequest) decodeReq(b []byte) error               { return expectEmpty(b) }
func (*GroupFeaturesRequest) appendReq(b []byte) ([]byte, error) { return b, nil }
func (*GroupFeaturesRequest) decodeReq(b []byte) error           { return expectEmpty(b) }
func (*MeterFeaturesRequest) appendReq(b []byte) ([]byte, error) { return b, nil }
func (*MeterFeaturesRequest) decodeReq(b []byte) error           { return expectEmpty(b) }
func (*PortDescRequest) appendReq(b []byte) ([]byte, error)      { return b, nil }
func (*PortDescRequest) decodeReq(b []byte) error                { return expectEmpty(b) }

// ---- fixed-layout request bodies (netrack structures) ----

// PortStatsRequest is an OFPMP_PORT_STATS request.
type PortStatsRequest ofp.PortStatsRequest

// QueueStatsRequest is an OFPMP_QUEUE request.
type QueueStatsRequest ofp.QueueStatsRequest

// GroupStatsRequest is an OFPMP_GROUP request.
type GroupStatsRequest ofp.GroupStatsRequest

// MeterStatsRequest is an OFPMP_METER request.
type MeterStatsRequest ofp.MeterStatsRequest

// MeterConfigRequest is an OFPMP_METER_CONFIG request.
type MeterConfigRequest ofp.MeterConfigRequest

// MultipartType implements MultipartRequestBody.
func (*PortStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypePortStats }

// MultipartType implements MultipartRequestBody.
func (*QueueStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeQueue }

// MultipartType implements MultipartRequestBody.
func (*GroupStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeGroup }

// MultipartType implements MultipartRequestBody.
func (*MeterStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeMeter }

// MultipartType implements MultipartRequestBody.
func (*MeterConfigRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeMeterConfig
}

func (r *PortStatsRequest) appendReq(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.PortStatsRequest)(r)), nil
}
func (r *PortStatsRequest) decodeReq(b []byte) error {
	return readFixed(b, 8, (*ofp.PortStatsRequest)(r), errBadLen)
}
func (r *QueueStatsRequest) appendReq(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.QueueStatsRequest)(r)), nil
}
func (r *QueueStatsRequest) decodeReq(b []byte) error {
	return readFixed(b, 8, (*ofp.QueueStatsRequest)(r), errBadLen)
}
func (r *GroupStatsRequest) appendReq(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.GroupStatsRequest)(r)), nil
}
func (r *GroupStatsRequest) decodeReq(b []byte) error {
	return readFixed(b, 8, (*ofp.GroupStatsRequest)(r), errBadLen)
}
func (r *MeterStatsRequest) appendReq(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.MeterStatsRequest)(r)), nil
}
func (r *MeterStatsRequest) decodeReq(b []byte) error {
	return readFixed(b, 8, (*ofp.MeterStatsRequest)(r), errBadLen)
}
func (r *MeterConfigRequest) appendReq(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.MeterConfigRequest)(r)), nil
}
func (r *MeterConfigRequest) decodeReq(b []byte) error {
	return readFixed(b, 8, (*ofp.MeterConfigRequest)(r), errBadLen)
}

// ---- flow and aggregate requests ----

// FlowStatsRequest is an OFPMP_FLOW request.
type FlowStatsRequest struct {
	TableID            uint8
	OutPort            ofp.PortNo
	OutGroup           ofp.Group
	Cookie, CookieMask uint64
	Match              Match
}

// AggregateStatsRequest is an OFPMP_AGGREGATE request (same layout).
type AggregateStatsRequest FlowStatsRequest

// MultipartType implements MultipartRequestBody.
func (*FlowStatsRequest) MultipartType() ofp.MultipartType { return ofp.MultipartTypeFlow }

// MultipartType implements MultipartRequestBody.
func (*AggregateStatsRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeAggregate
}

func (r *FlowStatsRequest) appendReq(b []byte) ([]byte, error) {
	b = appendZeros(append(b, r.TableID), 3)
	b = be.AppendUint32(b, uint32(r.OutPort))
	b = appendZeros(be.AppendUint32(b, uint32(r.OutGroup)), 4)
	b = be.AppendUint64(b, r.Cookie)
	b = be.AppendUint64(b, r.CookieMask)
	return appendMatch(b, r.Match)
}

func (r *FlowStatsRequest) decodeReq(b []byte) error {
	if len(b) < 32 {
		return errBadLen
	}
	m, n, err := parseMatch(b[32:])
	if err != nil {
		return err
	}
	if 32+n != len(b) {
		return errBadLen
	}
	*r = FlowStatsRequest{
		TableID: b[0], OutPort: ofp.PortNo(be.Uint32(b[4:])), OutGroup: ofp.Group(be.Uint32(b[8:])),
		Cookie: be.Uint64(b[16:]), CookieMask: be.Uint64(b[24:]), Match: m,
	}
	return nil
}

func (r *AggregateStatsRequest) appendReq(b []byte) ([]byte, error) {
	return (*FlowStatsRequest)(r).appendReq(b)
}
func (r *AggregateStatsRequest) decodeReq(b []byte) error {
	return (*FlowStatsRequest)(r).decodeReq(b)
}

// TableFeaturesRequest is an OFPMP_TABLE_FEATURES request: no tables reads
// the features, a list replaces the pipeline configuration.
type TableFeaturesRequest struct {
	Tables []TableFeatures
}

// MultipartType implements MultipartRequestBody.
func (*TableFeaturesRequest) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeTableFeatures
}

func (r *TableFeaturesRequest) appendReq(b []byte) ([]byte, error) {
	var err error
	for i := range r.Tables {
		if b, err = appendTableFeatures(b, &r.Tables[i]); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (r *TableFeaturesRequest) decodeReq(b []byte) error {
	ts, err := parseTableFeaturesList(b)
	r.Tables = ts
	return err
}

func parseTableFeaturesList(b []byte) ([]TableFeatures, error) {
	var out []TableFeatures
	for len(b) > 0 {
		t, n, err := parseTableFeatures(b)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		b = b[n:]
	}
	return out, nil
}

// ExperimenterMultipart is an OFPMP_EXPERIMENTER request or reply body.
type ExperimenterMultipart struct {
	Experimenter, ExpType uint32
	Data                  []byte
}

// MultipartType implements MultipartRequestBody and MultipartReplyBody.
func (*ExperimenterMultipart) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeExperimenter
}

func (e *ExperimenterMultipart) appendReq(b []byte) ([]byte, error) {
	b = be.AppendUint32(be.AppendUint32(b, e.Experimenter), e.ExpType)
	return append(b, e.Data...), nil
}

func (e *ExperimenterMultipart) decodeReq(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	*e = ExperimenterMultipart{Experimenter: be.Uint32(b), ExpType: be.Uint32(b[4:]), Data: cloneBytes(b[8:])}
	return nil
}

func (e *ExperimenterMultipart) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b, err := e.appendReq(b)
	return b, append(ends, len(b)), err
}
func (e *ExperimenterMultipart) decodeRep(b []byte) error { return e.decodeReq(b) }
func (e *ExperimenterMultipart) merge(o MultipartReplyBody) bool {
	x := o.(*ExperimenterMultipart)
	if x.Experimenter != e.Experimenter || x.ExpType != e.ExpType {
		return false
	}
	e.Data = append(e.Data, x.Data...)
	return true
}

// ---- single-structure replies ----

const (
	descStrLen   = 256
	serialNumLen = 32
)

// DescReply is the OFPMP_DESC reply. netrack's struct, our codec: its
// ReadFrom keeps the NUL padding in the strings.
type DescReply ofp.Description

// AggregateStatsReply is the OFPMP_AGGREGATE reply.
type AggregateStatsReply ofp.AggregateStats

// GroupFeaturesReply is the OFPMP_GROUP_FEATURES reply.
type GroupFeaturesReply ofp.GroupFeatures

// MeterFeaturesReply is the OFPMP_METER_FEATURES reply.
type MeterFeaturesReply ofp.MeterFeatures

// MultipartType implements MultipartReplyBody.
func (*DescReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeDescription }

// MultipartType implements MultipartReplyBody.
func (*AggregateStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeAggregate }

// MultipartType implements MultipartReplyBody.
func (*GroupFeaturesReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeGroupFeatures
}

// MultipartType implements MultipartReplyBody.
func (*MeterFeaturesReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeMeterFeatures
}

func (d *DescReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b = appendCString(b, d.Manufacturer, descStrLen)
	b = appendCString(b, d.Hardware, descStrLen)
	b = appendCString(b, d.Software, descStrLen)
	b = appendCString(b, d.SerialNum, serialNumLen)
	b = appendCString(b, d.Datapath, descStrLen)
	return b, append(ends, len(b)), nil
}

func (d *DescReply) decodeRep(b []byte) error {
	if len(b) != 4*descStrLen+serialNumLen {
		return errBadLen
	}
	*d = DescReply{
		Manufacturer: cString(b[0:256]),
		Hardware:     cString(b[256:512]),
		Software:     cString(b[512:768]),
		SerialNum:    cString(b[768:800]),
		Datapath:     cString(b[800:1056]),
	}
	return nil
}

func (*DescReply) merge(MultipartReplyBody) bool { return false }

func (a *AggregateStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b = appendFixed(b, (*ofp.AggregateStats)(a))
	return b, append(ends, len(b)), nil
}
func (a *AggregateStatsReply) decodeRep(b []byte) error {
	return readFixed(b, 24, (*ofp.AggregateStats)(a), errBadLen)
}
func (*AggregateStatsReply) merge(MultipartReplyBody) bool { return false }

func (g *GroupFeaturesReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b = appendFixed(b, (*ofp.GroupFeatures)(g))
	return b, append(ends, len(b)), nil
}
func (g *GroupFeaturesReply) decodeRep(b []byte) error {
	return readFixed(b, 40, (*ofp.GroupFeatures)(g), errBadLen)
}
func (*GroupFeaturesReply) merge(MultipartReplyBody) bool { return false }

func (m *MeterFeaturesReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b = appendFixed(b, (*ofp.MeterFeatures)(m))
	return b, append(ends, len(b)), nil
}
func (m *MeterFeaturesReply) decodeRep(b []byte) error {
	return readFixed(b, 16, (*ofp.MeterFeatures)(m), errBadLen)
}
func (*MeterFeaturesReply) merge(MultipartReplyBody) bool { return false }

// ---- arrays of fixed-layout netrack structures ----

// TableStatsReply is the OFPMP_TABLE reply.
type TableStatsReply struct{ Tables []ofp.TableStats }

// PortStatsReply is the OFPMP_PORT_STATS reply.
type PortStatsReply struct{ Ports []ofp.PortStats }

// QueueStatsReply is the OFPMP_QUEUE reply.
type QueueStatsReply struct{ Queues []ofp.QueueStats }

// PortDescReply is the OFPMP_PORT_DESC reply.
type PortDescReply struct{ Ports []Port }

// MultipartType implements MultipartReplyBody.
func (*TableStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeTable }

// MultipartType implements MultipartReplyBody.
func (*PortStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypePortStats }

// MultipartType implements MultipartReplyBody.
func (*QueueStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeQueue }

// MultipartType implements MultipartReplyBody.
func (*PortDescReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypePortDescription
}

// fixedItem is a fixed-layout netrack/openflow structure: *T reads and
// writes itself.
type fixedItem[T any] interface {
	*T
	io.ReaderFrom
	io.WriterTo
}

// appendFixedItems encodes items one after another, recording where each
// ends (multipart replies are split between items).
func appendFixedItems[T any, P fixedItem[T]](b []byte, ends []int, items []T) ([]byte, []int) {
	for i := range items {
		var w io.WriterTo = P(&items[i])
		b = appendFixed(b, w)
		ends = append(ends, len(b))
	}
	return b, ends
}

// decodeFixedItems decodes an array of size-byte structures.
func decodeFixedItems[T any, P fixedItem[T]](b []byte, size int) ([]T, error) {
	return parseFixedArray(b, size, func(v *T, c []byte) error {
		var rf io.ReaderFrom = P(v)
		return readFixed(c, size, rf, errBadLen)
	})
}

// parseFixedArray decodes len(b)/size records, each with read.
func parseFixedArray[T any](b []byte, size int, read func(*T, []byte) error) ([]T, error) {
	if len(b)%size != 0 {
		return nil, errBadLen
	}
	if len(b) == 0 {
		return nil, nil
	}
	out := make([]T, len(b)/size)
	for i := range out {
		if err := read(&out[i], b[i*size:(i+1)*size]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *TableStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b, ends = appendFixedItems(b, ends, r.Tables)
	return b, ends, nil
}
func (r *TableStatsReply) decodeRep(b []byte) (err error) {
	r.Tables, err = decodeFixedItems[ofp.TableStats](b, 24)
	return err
}
func (r *TableStatsReply) merge(o MultipartReplyBody) bool {
	r.Tables = append(r.Tables, o.(*TableStatsReply).Tables...)
	return true
}

func (r *PortStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b, ends = appendFixedItems(b, ends, r.Ports)
	return b, ends, nil
}
func (r *PortStatsReply) decodeRep(b []byte) (err error) {
	r.Ports, err = decodeFixedItems[ofp.PortStats](b, 112)
	return err
}
func (r *PortStatsReply) merge(o MultipartReplyBody) bool {
	r.Ports = append(r.Ports, o.(*PortStatsReply).Ports...)
	return true
}

func (r *QueueStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	b, ends = appendFixedItems(b, ends, r.Queues)
	return b, ends, nil
}
func (r *QueueStatsReply) decodeRep(b []byte) (err error) {
	r.Queues, err = decodeFixedItems[ofp.QueueStats](b, 40)
	return err
}
func (r *QueueStatsReply) merge(o MultipartReplyBody) bool {
	r.Queues = append(r.Queues, o.(*QueueStatsReply).Queues...)
	return true
}

func (r *PortDescReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	for i := range r.Ports {
		b = appendPort(b, &r.Ports[i])
		ends = append(ends, len(b))
	}
	return b, ends, nil
}
func (r *PortDescReply) decodeRep(b []byte) (err error) {
	r.Ports, err = parseFixedArray(b, portLen, func(p *Port, c []byte) error {
		*p = parsePort(c)
		return nil
	})
	return err
}
func (r *PortDescReply) merge(o MultipartReplyBody) bool {
	r.Ports = append(r.Ports, o.(*PortDescReply).Ports...)
	return true
}

// ---- variable-length entries ----

// FlowStats is one entry of the OFPMP_FLOW reply.
type FlowStats struct {
	TableID      uint8
	DurationSec  uint32
	DurationNSec uint32
	Priority     uint16
	IdleTimeout  uint16
	HardTimeout  uint16
	Flags        ofp.FlowModFlag
	Cookie       uint64
	PacketCount  uint64
	ByteCount    uint64
	Match        Match
	Instructions []Instruction
}

// FlowStatsReply is the OFPMP_FLOW reply.
type FlowStatsReply struct{ Flows []FlowStats }

// MultipartType implements MultipartReplyBody.
func (*FlowStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeFlow }

func (r *FlowStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	var err error
	for i := range r.Flows {
		f := &r.Flows[i]
		start := len(b)
		b = be.AppendUint16(b, 0)
		b = append(b, f.TableID, 0)
		b = be.AppendUint32(b, f.DurationSec)
		b = be.AppendUint32(b, f.DurationNSec)
		b = be.AppendUint16(b, f.Priority)
		b = be.AppendUint16(b, f.IdleTimeout)
		b = be.AppendUint16(b, f.HardTimeout)
		b = appendZeros(be.AppendUint16(b, uint16(f.Flags)), 4)
		b = be.AppendUint64(b, f.Cookie)
		b = be.AppendUint64(b, f.PacketCount)
		b = be.AppendUint64(b, f.ByteCount)
		if b, err = appendMatch(b, f.Match); err != nil {
			return b, ends, err
		}
		if b, err = appendInstructions(b, f.Instructions); err != nil {
			return b, ends, err
		}
		if len(b)-start > 0xffff {
			return b, ends, fmt.Errorf("ofpwire: flow stats entry too long")
		}
		putLen16(b, start, len(b)-start)
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *FlowStatsReply) decodeRep(b []byte) error {
	var out []FlowStats
	for len(b) > 0 {
		if len(b) < 56 {
			return errBadLen
		}
		n := int(be.Uint16(b))
		if n < 56 || n > len(b) {
			return errBadLen
		}
		m, mn, err := parseMatch(b[48:n])
		if err != nil {
			return err
		}
		ins, err := parseInstructions(b[48+mn : n])
		if err != nil {
			return err
		}
		out = append(out, FlowStats{
			TableID: b[2], DurationSec: be.Uint32(b[4:]), DurationNSec: be.Uint32(b[8:]),
			Priority: be.Uint16(b[12:]), IdleTimeout: be.Uint16(b[14:]), HardTimeout: be.Uint16(b[16:]),
			Flags: ofp.FlowModFlag(be.Uint16(b[18:])), Cookie: be.Uint64(b[24:]),
			PacketCount: be.Uint64(b[32:]), ByteCount: be.Uint64(b[40:]),
			Match: m, Instructions: ins,
		})
		b = b[n:]
	}
	r.Flows = out
	return nil
}

func (r *FlowStatsReply) merge(o MultipartReplyBody) bool {
	r.Flows = append(r.Flows, o.(*FlowStatsReply).Flows...)
	return true
}

// GroupStats is one entry of the OFPMP_GROUP reply.
type GroupStats struct {
	GroupID      ofp.Group
	RefCount     uint32
	PacketCount  uint64
	ByteCount    uint64
	DurationSec  uint32
	DurationNSec uint32
	BucketStats  []ofp.BucketCounter
}

// GroupStatsReply is the OFPMP_GROUP reply.
type GroupStatsReply struct{ Groups []GroupStats }

// MultipartType implements MultipartReplyBody.
func (*GroupStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeGroup }

func (r *GroupStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	for i := range r.Groups {
		g := &r.Groups[i]
		h := countersHead{ID: uint32(g.GroupID), Count: g.RefCount, Packets: g.PacketCount, Bytes: g.ByteCount,
			DurationSec: g.DurationSec, DurationNSec: g.DurationNSec}
		var err error
		if b, err = appendCounters(b, groupStatsLayout, h, g.BucketStats, func(c ofp.BucketCounter) (uint64, uint64) {
			return c.PacketCount, c.ByteCount
		}); err != nil {
			return b, ends, err
		}
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *GroupStatsReply) decodeRep(b []byte) error {
	var out []GroupStats
	err := parseCounters(b, groupStatsLayout, func(p, by uint64) ofp.BucketCounter {
		return ofp.BucketCounter{PacketCount: p, ByteCount: by}
	}, func(h countersHead, cs []ofp.BucketCounter) {
		out = append(out, GroupStats{GroupID: ofp.Group(h.ID), RefCount: h.Count, PacketCount: h.Packets, ByteCount: h.Bytes,
			DurationSec: h.DurationSec, DurationNSec: h.DurationNSec, BucketStats: cs})
	})
	if err != nil {
		return err
	}
	r.Groups = out
	return nil
}

func (r *GroupStatsReply) merge(o MultipartReplyBody) bool {
	r.Groups = append(r.Groups, o.(*GroupStatsReply).Groups...)
	return true
}

// GroupDesc is one entry of the OFPMP_GROUP_DESC reply.
type GroupDesc struct {
	Type    ofp.GroupType
	GroupID ofp.Group
	Buckets []Bucket
	// Selection is the group's selection_method, sent to 1.5 peers as
	// the property it came in (Open vSwitch's NTR_SELECTION_METHOD).
	Selection *GroupSelection
}

// GroupDescReply is the OFPMP_GROUP_DESC reply.
type GroupDescReply struct{ Groups []GroupDesc }

// MultipartType implements MultipartReplyBody.
func (*GroupDescReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeGroupDescription
}

func (r *GroupDescReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	var err error
	for i := range r.Groups {
		g := &r.Groups[i]
		start := len(b)
		b = be.AppendUint16(b, 0)
		b = append(b, byte(g.Type), 0)
		b = be.AppendUint32(b, uint32(g.GroupID))
		if b, err = appendBuckets(b, g.Buckets); err != nil {
			return b, ends, err
		}
		if len(b)-start > 0xffff {
			return b, ends, fmt.Errorf("ofpwire: group description too long")
		}
		putLen16(b, start, len(b)-start)
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *GroupDescReply) decodeRep(b []byte) error {
	var out []GroupDesc
	for len(b) > 0 {
		if len(b) < 8 {
			return errBadLen
		}
		n := int(be.Uint16(b))
		if n < 8 || n > len(b) {
			return errBadLen
		}
		bs, err := parseBuckets(b[8:n])
		if err != nil {
			return err
		}
		out = append(out, GroupDesc{Type: ofp.GroupType(b[2]), GroupID: ofp.Group(be.Uint32(b[4:])), Buckets: bs})
		b = b[n:]
	}
	r.Groups = out
	return nil
}

func (r *GroupDescReply) merge(o MultipartReplyBody) bool {
	r.Groups = append(r.Groups, o.(*GroupDescReply).Groups...)
	return true
}

// MeterStats is one entry of the OFPMP_METER reply.
type MeterStats struct {
	MeterID       ofp.Meter
	FlowCount     uint32
	PacketInCount uint64
	ByteInCount   uint64
	DurationSec   uint32
	DurationNSec  uint32
	BandStats     []ofp.MeterBandStats
}

// MeterStatsReply is the OFPMP_METER reply.
type MeterStatsReply struct{ Meters []MeterStats }

// MultipartType implements MultipartReplyBody.
func (*MeterStatsReply) MultipartType() ofp.MultipartType { return ofp.MultipartTypeMeter }

func (r *MeterStatsReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	for i := range r.Meters {
		m := &r.Meters[i]
		h := countersHead{ID: uint32(m.MeterID), Count: m.FlowCount, Packets: m.PacketInCount, Bytes: m.ByteInCount,
			DurationSec: m.DurationSec, DurationNSec: m.DurationNSec}
		var err error
		if b, err = appendCounters(b, meterStatsLayout, h, m.BandStats, func(s ofp.MeterBandStats) (uint64, uint64) {
			return s.PacketBandCount, s.ByteBandCount
		}); err != nil {
			return b, ends, err
		}
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *MeterStatsReply) decodeRep(b []byte) error {
	var out []MeterStats
	err := parseCounters(b, meterStatsLayout, func(p, by uint64) ofp.MeterBandStats {
		return ofp.MeterBandStats{PacketBandCount: p, ByteBandCount: by}
	}, func(h countersHead, bs []ofp.MeterBandStats) {
		out = append(out, MeterStats{MeterID: ofp.Meter(h.ID), FlowCount: h.Count, PacketInCount: h.Packets, ByteInCount: h.Bytes,
			DurationSec: h.DurationSec, DurationNSec: h.DurationNSec, BandStats: bs})
	})
	if err != nil {
		return err
	}
	r.Meters = out
	return nil
}

func (r *MeterStatsReply) merge(o MultipartReplyBody) bool {
	r.Meters = append(r.Meters, o.(*MeterStatsReply).Meters...)
	return true
}

// MeterConfig is one entry of the OFPMP_METER_CONFIG reply.
type MeterConfig struct {
	Flags   ofp.MeterFlag
	MeterID ofp.Meter
	Bands   []MeterBand
}

// MeterConfigReply is the OFPMP_METER_CONFIG reply.
type MeterConfigReply struct{ Meters []MeterConfig }

// MultipartType implements MultipartReplyBody.
func (*MeterConfigReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeMeterConfig
}

func (r *MeterConfigReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	var err error
	for i := range r.Meters {
		m := &r.Meters[i]
		start := len(b)
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, uint16(m.Flags))
		b = be.AppendUint32(b, uint32(m.MeterID))
		if b, err = appendBands(b, m.Bands); err != nil {
			return b, ends, err
		}
		if len(b)-start > 0xffff {
			return b, ends, fmt.Errorf("ofpwire: meter config too long")
		}
		putLen16(b, start, len(b)-start)
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *MeterConfigReply) decodeRep(b []byte) error {
	var out []MeterConfig
	for len(b) > 0 {
		if len(b) < 8 {
			return errBadLen
		}
		n := int(be.Uint16(b))
		if n < 8 || n > len(b) {
			return errBadLen
		}
		bands, err := parseBands(b[8:n])
		if err != nil {
			return err
		}
		out = append(out, MeterConfig{Flags: ofp.MeterFlag(be.Uint16(b[2:])), MeterID: ofp.Meter(be.Uint32(b[4:])), Bands: bands})
		b = b[n:]
	}
	r.Meters = out
	return nil
}

func (r *MeterConfigReply) merge(o MultipartReplyBody) bool {
	r.Meters = append(r.Meters, o.(*MeterConfigReply).Meters...)
	return true
}

// TableFeaturesReply is the OFPMP_TABLE_FEATURES reply.
type TableFeaturesReply struct{ Tables []TableFeatures }

// MultipartType implements MultipartReplyBody.
func (*TableFeaturesReply) MultipartType() ofp.MultipartType {
	return ofp.MultipartTypeTableFeatures
}

func (r *TableFeaturesReply) appendItems(b []byte, ends []int) ([]byte, []int, error) {
	var err error
	for i := range r.Tables {
		if b, err = appendTableFeatures(b, &r.Tables[i]); err != nil {
			return b, ends, err
		}
		ends = append(ends, len(b))
	}
	return b, ends, nil
}

func (r *TableFeaturesReply) decodeRep(b []byte) (err error) {
	r.Tables, err = parseTableFeaturesList(b)
	return err
}

func (r *TableFeaturesReply) merge(o MultipartReplyBody) bool {
	r.Tables = append(r.Tables, o.(*TableFeaturesReply).Tables...)
	return true
}

// stampBucketIDs15 writes each bucket's ID into the 1.5 group
// descriptions items holds (ends as downgradeItems returns them), which
// were rewritten from the 1.3 layout, where buckets have no id and so
// are numbered by position. A group whose buckets' IDs are not distinct
// (a GroupDesc built without them) keeps those positions.
func stampBucketIDs15(items []byte, ends []int, groups []GroupDesc) {
	start := 0
	for i, end := range ends {
		if i >= len(groups) {
			return
		}
		it := items[start:end]
		start = end
		if len(it) < 16 || !distinctIDs(groups[i].Buckets) {
			continue
		}
		bs := it[16:]
		for j := 0; j < len(groups[i].Buckets) && len(bs) >= 8; j++ {
			n := int(be.Uint16(bs))
			if n < 8 || n > len(bs) {
				break
			}
			be.PutUint32(bs[4:], groups[i].Buckets[j].ID)
			bs = bs[n:]
		}
	}
}

// appendGroupProps15 appends to each 1.5 group description (items, ended
// at ends) whose group has a selection method the property that says it,
// after its buckets, as Open vSwitch reports it; the item lengths and
// ends follow.
func appendGroupProps15(items []byte, ends []int, groups []GroupDesc) ([]byte, []int, error) {
	has := false
	for i := range groups {
		has = has || groups[i].Selection != nil
	}
	if !has || len(ends) != len(groups) {
		return items, ends, nil
	}
	var out []byte
	nends := make([]int, 0, len(ends))
	start := 0
	for i, end := range ends {
		itemStart := len(out)
		out = append(out, items[start:end]...)
		start = end
		if sel := groups[i].Selection; sel != nil {
			var err error
			if out, err = appendSelectionProp15(out, sel); err != nil {
				return nil, nil, err
			}
			if len(out)-itemStart > 0xffff {
				return nil, nil, fmt.Errorf("ofpwire: group description too long")
			}
			putLen16(out, itemStart, len(out)-itemStart)
		}
		nends = append(nends, len(out))
	}
	return out, nends, nil
}

// appendSelectionProp15 appends Open vSwitch's selection_method group
// property (an OFPGPT15_EXPERIMENTER property of NTR_VENDOR_ID,
// NTRT_SELECTION_METHOD): the method's name in 16 bytes, its parameter,
// the hashed fields (each an OXM whose value is the mask of the bits
// hashed); its length leaves out the padding to 8 bytes.
func appendSelectionProp15(b []byte, sel *GroupSelection) ([]byte, error) {
	if len(sel.Method) >= 16 {
		return b, fmt.Errorf("ofpwire: selection_method %q too long", sel.Method)
	}
	start := len(b)
	b = be.AppendUint16(b, groupPropExperimenter)
	b = be.AppendUint16(b, 0)
	b = be.AppendUint32(b, ntrVendor)
	b = be.AppendUint32(b, ntrSelectionMethod)
	b = appendZeros(b, 4)
	b = append(b, sel.Method...)
	b = appendZeros(b, 16-len(sel.Method))
	b = be.AppendUint64(b, sel.Param)
	var err error
	for _, o := range sel.Fields {
		if b, err = appendOXM(b, o); err != nil {
			return b, err
		}
	}
	putLen16(b, start+2, len(b)-start)
	return appendZeros(b, roundUp8(len(b)-start)-(len(b)-start)), nil
}

// NumberBuckets gives bs their positions as IDs unless their IDs are
// distinct already (they came from an OpenFlow 1.5 group-mod).
func NumberBuckets(bs []Bucket) {
	if distinctIDs(bs) {
		return
	}
	for i := range bs {
		bs[i].ID = uint32(i)
	}
}

// distinctIDs reports whether no two buckets of bs have the same ID.
func distinctIDs(bs []Bucket) bool {
	ids := make([]uint32, len(bs))
	for i := range bs {
		ids[i] = bs[i].ID
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return false
		}
	}
	return true
}
