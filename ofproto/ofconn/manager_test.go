package ofconn

import (
	"testing"
	"time"
)

// TestMessageCountsSurviveClosedConnections: the messages of a target's
// closed connections stay in its Status, so per-target sums only grow.
func TestMessageCountsSurviveClosedConnections(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: &recHandler{}}, target)
	total := func() (in, out uint64) {
		for _, s := range m.Status() {
			if s.Target == target {
				in += s.MsgsIn
				out += s.MsgsOut
			}
		}
		return in, out
	}
	a := connect(t, m, target)
	a.echo(1)
	in1, out1 := total()
	if in1 < 3 || out1 < 3 {
		t.Fatalf("counts %d in %d out after hello and two echoes", in1, out1)
	}
	a.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(m.Status()) != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // until the switch has seen the close
	}
	if in2, out2 := total(); in2 < in1 || out2 < out1 {
		t.Fatalf("counts went down when the connection closed: %d/%d → %d/%d", in1, out1, in2, out2)
	}
	b := connect(t, m, target)
	b.echo(2)
	if in3, _ := total(); in3 <= in1 {
		t.Fatalf("second connection's messages not added: %d then %d", in1, in3)
	}
}

// TestStatusAfterClose: a closed manager's Status still gives each
// target's final counters (its open connections' included), which the
// daemon carries over to the manager of a rebuilt bridge.
func TestStatusAfterClose(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: &recHandler{}}, target)
	total := func() (in, out uint64) {
		for _, s := range m.Status() {
			if s.Target == target {
				in += s.MsgsIn
				out += s.MsgsOut
			}
		}
		return in, out
	}
	a := connect(t, m, target)
	a.echo(1)
	in1, out1 := total()
	m.Close()
	if in2, out2 := total(); in2 < in1 || out2 < out1 || in1 == 0 {
		t.Fatalf("counts after Close %d/%d, before %d/%d", in2, out2, in1, out1)
	}
}
