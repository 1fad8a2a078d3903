package dbserver

import (
	"context"
	"fmt"
	"reflect"

	"github.com/ovn-kubernetes/libovsdb/model"
)

// List fills result, a pointer to a slice of one table's models
// (*[]vswitchdb.Bridge), with copies of that table's rows, as libovsdb's
// client.List does from its cache. The daemon reads its own database
// this way before it serves anyone: its configuration at start is the
// database's, not an older record of it.
func (s *Server) List(_ context.Context, result any) error {
	rv := reflect.ValueOf(result)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("dbserver: List wants a pointer to a slice of models, got %T", result)
	}
	slice := rv.Elem()
	elem := slice.Type().Elem()
	table := s.db.model.FindTable(reflect.PointerTo(elem))
	if table == "" {
		return fmt.Errorf("dbserver: %v is no table's model", elem)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	models, err := s.db.mem.List(s.db.name, table)
	if err != nil {
		return err
	}
	out := reflect.MakeSlice(slice.Type(), 0, len(models))
	for _, m := range models {
		out = reflect.Append(out, reflect.ValueOf(model.Clone(m)).Elem())
	}
	slice.Set(out)
	return nil
}
