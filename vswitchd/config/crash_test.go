package config

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// helperDirEnv tells a re-executed test binary to act as the crashing writer.
const helperDirEnv = "VSWITCHD_CONFIG_CRASH_HELPER_DIR"

// TestHelperProcess is not a test on its own: TestCrashSafetyKill9 runs the
// test binary again with helperDirEnv set, and this function then commits
// Updates forever, printing each acknowledged generation, until killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		return
	}
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper open:", err)
		os.Exit(2)
	}
	for {
		next := s.Generation() + 1
		_, err := s.Update(func(c *Config) error {
			if c.Bridges == nil {
				c.Bridges = map[string]*Bridge{"br0": {Name: "br0"}}
			}
			if c.OtherConfig == nil {
				c.OtherConfig = map[string]string{}
			}
			// The counter must always equal the generation on disk:
			// a torn or mixed state would break that.
			c.OtherConfig["test-counter"] = strconv.FormatUint(next, 10)
			b := c.Bridges["br0"]
			if b.Ports == nil {
				b.Ports = map[string]*Port{}
			}
			name := fmt.Sprintf("p%d", next%16)
			if _, ok := b.Ports[name]; ok {
				delete(b.Ports, name)
			} else {
				b.Ports[name] = &Port{Name: name, Type: PortTypeAFPacket}
			}
			if b.OtherConfig == nil {
				b.OtherConfig = map[string]string{}
			}
			b.OtherConfig[fmt.Sprintf("test-%d", next%32)] = strconv.FormatUint(next, 10)
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper update:", err)
			os.Exit(3)
		}
		// Acknowledge only after Update returned.
		fmt.Fprintln(os.Stdout, next)
	}
}

func TestCrashSafetyKill9(t *testing.T) {
	dir := t.TempDir()
	const rounds = 6
	var lastAck uint64
	progressed := 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan uint64, 1)
		committing := make(chan struct{})
		go func() {
			var last uint64
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					if last == 0 {
						close(committing)
					}
					last = n
				}
			}
			if last == 0 {
				close(committing)
			}
			acks <- last
		}()
		// Wait for the child to be committing (its start can take long on
		// a loaded machine), then kill at a random moment.
		select {
		case <-committing:
		case <-time.After(30 * time.Second):
			t.Logf("round %d: no acknowledgement within 30 s", round)
		}
		time.Sleep(time.Duration(rand.IntN(170)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ack := <-acks // EOF: every line the child wrote before dying is read
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die of SIGKILL: %v", round, werr)
		}
		if ack > lastAck {
			lastAck = ack
			progressed++
		}

		s, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: Open after kill -9: %v", round, err)
		}
		c, gen := s.Snapshot()
		s.Close()
		if gen < lastAck {
			t.Fatalf("round %d: generation %d on disk < last acknowledged %d", round, gen, lastAck)
		}
		// At most the one Update in flight when killed can be ahead.
		if gen > lastAck+1 {
			t.Fatalf("round %d: generation %d on disk > last acknowledged %d + 1", round, gen, lastAck)
		}
		if gen > 0 && c.OtherConfig["test-counter"] != strconv.FormatUint(gen, 10) {
			t.Fatalf("round %d: counter %q disagrees with generation %d: mixed state", round, c.OtherConfig["test-counter"], gen)
		}
		if err := Validate(c); err != nil {
			t.Fatalf("round %d: recovered state invalid: %v", round, err)
		}
		if matches, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(matches) != 0 {
			t.Fatalf("round %d: Open left temp files %v", round, matches)
		}
		// The next child continues from what is on disk.
		lastAck = gen
		t.Logf("round %d: acknowledged %d, recovered generation %d", round, ack, gen)
	}
	if progressed < rounds/2 {
		t.Fatalf("child made progress in only %d of %d rounds; the test did not exercise crashes", progressed, rounds)
	}
}
