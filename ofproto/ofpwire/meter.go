package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

const meterBandLen = 16

// MeterBand is an ofp_meter_band_*: PrecLevel is used by DSCP_REMARK only,
// Experimenter and Data by EXPERIMENTER only.
type MeterBand struct {
	Type         ofp.MeterBandType
	Rate         uint32
	BurstSize    uint32
	PrecLevel    uint8
	Experimenter uint32
	Data         []byte
}

func appendBands(b []byte, bands []MeterBand) ([]byte, error) {
	for _, mb := range bands {
		n := meterBandLen
		if mb.Type == ofp.MeterBandTypeExperimenter {
			n = roundUp8(meterBandLen + len(mb.Data))
		} else if len(mb.Data) != 0 {
			return b, fmt.Errorf("ofpwire: meter band type %d carries no data", mb.Type)
		}
		if n > 0xfff8 {
			return b, fmt.Errorf("ofpwire: meter band too long")
		}
		b = be.AppendUint16(b, uint16(mb.Type))
		b = be.AppendUint16(b, uint16(n))
		b = be.AppendUint32(b, mb.Rate)
		b = be.AppendUint32(b, mb.BurstSize)
		switch mb.Type {
		case ofp.MeterBandTypeDSCPRemark:
			b = appendZeros(append(b, mb.PrecLevel), 3)
		case ofp.MeterBandTypeExperimenter:
			b = be.AppendUint32(b, mb.Experimenter)
			b = append(b, mb.Data...)
			b = appendZeros(b, n-meterBandLen-len(mb.Data))
		default:
			b = appendZeros(b, 4)
		}
	}
	return b, nil
}

// parseBands decodes a band list that fills b exactly.
func parseBands(b []byte) ([]MeterBand, error) {
	var out []MeterBand
	for len(b) > 0 {
		if len(b) < meterBandLen {
			return nil, errBand
		}
		t := ofp.MeterBandType(be.Uint16(b))
		n := int(be.Uint16(b[2:]))
		if n < meterBandLen || n%8 != 0 || n > len(b) {
			return nil, errBand
		}
		mb := MeterBand{Type: t, Rate: be.Uint32(b[4:]), BurstSize: be.Uint32(b[8:])}
		switch t {
		case ofp.MeterBandTypeDrop:
		case ofp.MeterBandTypeDSCPRemark:
			mb.PrecLevel = b[12]
		case ofp.MeterBandTypeExperimenter:
			mb.Experimenter = be.Uint32(b[12:])
			mb.Data = cloneBytes(b[meterBandLen:n])
		default:
			return nil, errBand
		}
		if t != ofp.MeterBandTypeExperimenter && n != meterBandLen {
			return nil, errBand
		}
		out = append(out, mb)
		b = b[n:]
	}
	return out, nil
}

// MeterMod is OFPT_METER_MOD.
type MeterMod struct {
	Command ofp.MeterCommand
	Flags   ofp.MeterFlag
	MeterID ofp.Meter
	Bands   []MeterBand
}

// MsgType implements Message.
func (*MeterMod) MsgType() openflow.Type { return openflow.TypeMeterMod }

func (m *MeterMod) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint16(b, uint16(m.Command))
	b = be.AppendUint16(b, uint16(m.Flags))
	b = be.AppendUint32(b, uint32(m.MeterID))
	return appendBands(b, m.Bands)
}

func (m *MeterMod) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	if ofp.MeterCommand(be.Uint16(b)) > ofp.MeterDelete {
		return newErr(ETMeterModFailed, MMFCBadCommand)
	}
	bands, err := parseBands(b[8:])
	if err != nil {
		return err
	}
	*m = MeterMod{
		Command: ofp.MeterCommand(be.Uint16(b)), Flags: ofp.MeterFlag(be.Uint16(b[2:])),
		MeterID: ofp.Meter(be.Uint32(b[4:])), Bands: bands,
	}
	return nil
}
