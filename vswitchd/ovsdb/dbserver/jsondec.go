package dbserver

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// wireOperation is an operation as JSON-RPC carries it, its values still
// in JSON's types.
type wireOperation struct {
	Op        string           `json:"op"`
	Table     string           `json:"table"`
	Row       map[string]any   `json:"row"`
	Rows      []map[string]any `json:"rows"`
	Columns   []string         `json:"columns"`
	Mutations [][]any          `json:"mutations"`
	Timeout   *int             `json:"timeout"`
	Where     [][]any          `json:"where"`
	Until     string           `json:"until"`
	Durable   *bool            `json:"durable"`
	Comment   *string          `json:"comment"`
	Lock      *string          `json:"lock"`
	UUID      string           `json:"uuid"`
	UUIDName  string           `json:"uuid-name"`
}

// decodeOperation reads one operation into libovsdb's notation, as
// libovsdb's own UnmarshalJSON methods do, but in one decoding: theirs
// marshal every array value back to JSON and decode it again into its
// type, which made decoding most of a transaction's time (ovs-vsctl sends
// a wait on every port of a bridge in each of its transactions). A
// malformed value is an error, never a panic.
func decodeOperation(a json.RawMessage) (ovsdb.Operation, error) {
	w, ok := fastWireOperation(a)
	if !ok {
		w = wireOperation{}
		if err := json.Unmarshal(a, &w); err != nil {
			return ovsdb.Operation{}, err
		}
	}
	op := ovsdb.Operation{Op: w.Op, Table: w.Table, Columns: w.Columns, Timeout: w.Timeout, Until: w.Until,
		Durable: w.Durable, Comment: w.Comment, Lock: w.Lock, UUID: w.UUID, UUIDName: w.UUIDName}
	var err error
	if w.Row != nil {
		if op.Row, err = notationRow(w.Row); err != nil {
			return op, err
		}
	}
	if w.Rows != nil {
		op.Rows = make([]ovsdb.Row, len(w.Rows))
		for i, r := range w.Rows {
			if op.Rows[i], err = notationRow(r); err != nil {
				return op, err
			}
		}
	}
	if w.Where != nil {
		op.Where = make([]ovsdb.Condition, len(w.Where))
		for i, c := range w.Where {
			col, fn, v, err := triple(c, "condition")
			if err != nil {
				return op, err
			}
			f := ovsdb.ConditionFunction(fn)
			switch f {
			case ovsdb.ConditionEqual, ovsdb.ConditionNotEqual, ovsdb.ConditionIncludes, ovsdb.ConditionExcludes,
				ovsdb.ConditionGreaterThan, ovsdb.ConditionGreaterThanOrEqual, ovsdb.ConditionLessThan, ovsdb.ConditionLessThanOrEqual:
			default:
				return op, fmt.Errorf("%s is not a valid function", fn)
			}
			op.Where[i] = ovsdb.Condition{Column: col, Function: f, Value: v}
		}
	}
	if w.Mutations != nil {
		op.Mutations = make([]ovsdb.Mutation, len(w.Mutations))
		for i, m := range w.Mutations {
			col, mut, v, err := triple(m, "mutation")
			if err != nil {
				return op, err
			}
			mu := ovsdb.Mutator(mut)
			switch mu {
			case ovsdb.MutateOperationDelete, ovsdb.MutateOperationInsert, ovsdb.MutateOperationAdd, ovsdb.MutateOperationSubtract,
				ovsdb.MutateOperationMultiply, ovsdb.MutateOperationDivide, ovsdb.MutateOperationModulo:
			default:
				return op, fmt.Errorf("%s is not a valid mutator", mut)
			}
			op.Mutations[i] = ovsdb.Mutation{Column: col, Mutator: mu, Value: v}
		}
	}
	return op, nil
}

// triple reads a condition or mutation: [column, function, value].
func triple(t []any, what string) (string, string, any, error) {
	if len(t) != 3 {
		return "", "", nil, fmt.Errorf("a %s is a 3 element json array, not %d", what, len(t))
	}
	col, ok1 := t[0].(string)
	fn, ok2 := t[1].(string)
	if !ok1 || !ok2 {
		return "", "", nil, fmt.Errorf("a %s's column and function are strings", what)
	}
	v, err := notation(t[2])
	return col, fn, v, err
}

func notationRow(r map[string]any) (ovsdb.Row, error) {
	out := make(ovsdb.Row, len(r))
	for k, v := range r {
		nv, err := notation(v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", k, err)
		}
		out[k] = nv
	}
	return out, nil
}

var errMalformed = errors.New("malformed value")

// notation turns a value decoded from JSON into libovsdb's notation:
// ["uuid",U] and ["named-uuid",N] into ovsdb.UUID, ["set",[...]] into
// ovsdb.OvsSet, ["map",[[k,v]...]] into ovsdb.OvsMap; atoms stay.
func notation(v any) (any, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return v, nil
	}
	switch a[0] {
	case "uuid", "named-uuid":
		// As libovsdb reads it: an array of strings, the second the id.
		for _, e := range a {
			if _, ok := e.(string); !ok {
				return nil, fmt.Errorf("%w: %v of a %T", errMalformed, a[0], e)
			}
		}
		if len(a) < 2 {
			return nil, fmt.Errorf("%w: %v without an id", errMalformed, a[0])
		}
		return ovsdb.UUID{GoUUID: a[1].(string)}, nil
	case "set":
		if len(a) < 2 {
			return nil, fmt.Errorf("%w: set", errMalformed)
		}
		elems, ok := a[1].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: set of a %T", errMalformed, a[1])
		}
		set := ovsdb.OvsSet{GoSet: make([]any, 0, len(elems))}
		for _, e := range elems {
			ne, err := notation(e)
			if err != nil {
				return nil, err
			}
			set.GoSet = append(set.GoSet, ne)
		}
		return set, nil
	case "map":
		m := ovsdb.OvsMap{GoMap: map[any]any{}}
		if len(a) < 2 {
			return m, nil
		}
		pairs, ok := a[1].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: map of a %T", errMalformed, a[1])
		}
		for _, p := range pairs {
			kv, ok := p.([]any)
			if !ok || len(kv) < 2 {
				return nil, fmt.Errorf("%w: a map pair is [key, value]", errMalformed)
			}
			var k, val any
			var err error
			if k, err = mapAtom(kv[0]); err != nil {
				return nil, err
			}
			if val, err = mapAtom(kv[1]); err != nil {
				return nil, err
			}
			if !comparable(k) {
				return nil, fmt.Errorf("%w: map key %v", errMalformed, kv[0])
			}
			m.GoMap[k] = val
		}
		return m, nil
	}
	return v, nil
}

// mapAtom reads a map's key or value: an atom or a [uuid] pair.
func mapAtom(v any) (any, error) {
	if a, ok := v.([]any); ok {
		if len(a) != 2 || a[0] == "map" || a[0] == "set" {
			return nil, fmt.Errorf("%w: a map holds atoms", errMalformed)
		}
		return notation(a)
	}
	return v, nil
}

// comparable reports whether a decoded atom can key a Go map (a JSON
// object cannot).
func comparable(k any) bool {
	switch k.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}
