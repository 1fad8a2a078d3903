package ovsdb

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// modelLayout is where a model type's columns are: its table, and per
// field offset the column. libovsdb's Update finds each field's column
// by walking the struct's fields per field and converts the whole row
// first: the write-back of a thousand interfaces' counters spent most of
// its time there.
type modelLayout struct {
	table   string
	columns map[uintptr]string
	uuid    int // the _uuid field's index
}

var layouts = sync.OnceValue(func() map[reflect.Type]*modelLayout {
	out := map[reflect.Type]*modelLayout{}
	dbm, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		panic(err)
	}
	for table, t := range dbm.Types() {
		st := t.Elem()
		l := &modelLayout{table: table, columns: map[uintptr]string{}}
		for i := range st.NumField() {
			f := st.Field(i)
			col := f.Tag.Get("ovsdb")
			if col == "" {
				continue
			}
			l.columns[f.Offset] = col
			if col == "_uuid" {
				l.uuid = i
			}
		}
		out[t] = l
	}
	return out
})

// updateOp is the update of the columns fields point into (fields of the
// model m points to) in m's row, as libovsdb's Where(m).Update(m,
// fields...) makes it.
func updateOp(schema *ovsdb.DatabaseSchema, m model.Model, fields ...any) (ovsdb.Operation, error) {
	v := reflect.ValueOf(m)
	l := layouts()[v.Type()]
	if l == nil {
		return ovsdb.Operation{}, fmt.Errorf("no table for %T", m)
	}
	ts := schema.Table(l.table)
	if ts == nil {
		return ovsdb.Operation{}, fmt.Errorf("the database has no table %s", l.table)
	}
	base := v.Pointer()
	row := make(ovsdb.Row, len(fields))
	for _, f := range fields {
		fv := reflect.ValueOf(f)
		col, ok := l.columns[fv.Pointer()-base]
		if !ok || fv.Pointer() < base {
			return ovsdb.Operation{}, fmt.Errorf("%T: a field pointer outside its columns", m)
		}
		cs := ts.Column(col)
		if cs == nil {
			return ovsdb.Operation{}, fmt.Errorf("table %s has no column %s", l.table, col)
		}
		ov, err := ovsdb.NativeToOvs(cs, fv.Elem().Interface())
		if err != nil {
			return ovsdb.Operation{}, fmt.Errorf("table %s, column %s: %w", l.table, col, err)
		}
		row[col] = ov
	}
	id := v.Elem().Field(l.uuid).String()
	return ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: l.table, Row: row,
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: id})}}, nil
}
