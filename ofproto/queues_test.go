package ofproto

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// OpenFlow 1.3 §7.3.5.8 (OFPMP_QUEUE) and §7.3.6 (OFPT_QUEUE_GET_CONFIG):
// the switch has no queues, so every port answers with none; a port that
// does not exist is OFPET_QUEUE_OP_FAILED / OFPQOFC_BAD_PORT.

func TestQueueStatsNoQueues(t *testing.T) {
	tb := newTestBridge(t)
	for _, port := range []ofp.PortNo{ofp.PortAny, 1, 2} {
		st := tb.c.multipart(&ofpwire.QueueStatsRequest{Port: port, Queue: ofp.QueueAll}).(*ofpwire.QueueStatsReply)
		if len(st.Queues) != 0 {
			t.Fatalf("port %d: queues %+v, want none", port, st.Queues)
		}
	}
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.QueueStatsRequest{Port: 9, Queue: ofp.QueueAll}},
		ofpwire.ETQueueOpFailed, ofpwire.QOFCBadPort)
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.QueueStatsRequest{Port: 1, Queue: 0}},
		ofpwire.ETQueueOpFailed, ofpwire.QOFCBadQueue)
}

func TestQueueGetConfigNoQueues(t *testing.T) {
	tb := newTestBridge(t)
	for _, port := range []ofp.PortNo{ofp.PortAny, 2} {
		r := tb.c.request(&ofpwire.QueueGetConfigRequest{Port: port})
		if len(r) != 1 {
			t.Fatalf("port %d: replies %#v", port, r)
		}
		qc, ok := r[0].(*ofpwire.QueueGetConfigReply)
		if !ok || qc.Port != port || len(qc.Queues) != 0 {
			t.Fatalf("port %d: reply %#v, want the port with no queues", port, r[0])
		}
	}
	tb.c.wantError(&ofpwire.QueueGetConfigRequest{Port: 9}, ofpwire.ETQueueOpFailed, ofpwire.QOFCBadPort)
}

// TestQueueOvsOfctl: ovs-ofctl's queue-stats and queue-get-config against
// the bridge's management socket.
func TestQueueOvsOfctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	tb := newTestBridge(t)
	target := "unix:" + tb.sock
	if out := ovsOfctl(t, "queue-stats", target); !strings.Contains(out, "OFPST_QUEUE reply") {
		t.Fatalf("queue-stats:\n%s", out)
	}
	if out := ovsOfctl(t, "queue-stats", target, "1"); !strings.Contains(out, "OFPST_QUEUE reply") {
		t.Fatalf("queue-stats 1:\n%s", out)
	}
	if out := ovsOfctl(t, "queue-get-config", target, "1"); !strings.Contains(out, "OFPT_QUEUE_GET_CONFIG_REPLY") {
		t.Fatalf("queue-get-config 1:\n%s", out)
	}
	if out := ovsOfctl(t, "queue-get-config", target); !strings.Contains(out, "OFPT_QUEUE_GET_CONFIG_REPLY") {
		t.Fatalf("queue-get-config:\n%s", out)
	}
	// A port the switch does not have: the spec's error, which ovs-ofctl
	// prints (its exit status differs between the two commands).
	for _, cmd := range []string{"queue-stats", "queue-get-config"} {
		if out, _ := ovsOfctlErr(cmd, target, "9"); !strings.Contains(out, "OFPQOFC_BAD_PORT") {
			t.Fatalf("%s 9:\n%s", cmd, out)
		}
	}
}

// ovsOfctlErr runs ovs-ofctl -O OpenFlow13 and returns its output and
// error, for commands expected to fail.
func ovsOfctlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", append([]string{"-O", "OpenFlow13"}, args...)...).CombinedOutput()
	return string(out), err
}
