package nstest

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// IperfTCP runs an iperf3 TCP stream of secs seconds from namespace client
// to a one-off server in namespace server bound to ip (one of server's
// addresses), on a random port in 20000-60000, and returns the bits per
// second the server received. It fails the test if iperf3 fails, reports
// an error or moved nothing. Both processes are gone when it returns.
func IperfTCP(t testing.TB, client, server *Netns, ip string, secs int) float64 {
	t.Helper()
	return IperfTCPVia(t, client, server, ip, ip, secs)
}

// IperfTCPVia is IperfTCP with the client connecting to ip and the server
// listening on bind: an address translated on the way (DNAT) to bind.
func IperfTCPVia(t testing.TB, client, server *Netns, ip, bind string, secs int) float64 {
	t.Helper()
	RequireTool(t, "iperf3")
	port := strconv.Itoa(20000 + rand.IntN(40000))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+30)*time.Second)
	defer cancel()
	srv := server.Cmd(ctx, "iperf3", "-s", "-1", "-p", port, "-B", bind)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	var out []byte
	var err error
	for try := 0; try < 50; try++ {
		out, err = client.Cmd(ctx, "iperf3", "-c", ip, "-p", port, "-t", strconv.Itoa(secs), "-J").CombinedOutput()
		// The server may not be listening yet.
		if !strings.Contains(string(out), "unable to connect") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 client: %v\n%s\nserver: %s", err, out, srvOut.String())
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Bytes         uint64  `json:"bytes"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.Error != "" {
		t.Fatalf("iperf3: %s", res.Error)
	}
	if res.End.SumReceived.BitsPerSecond <= 0 || res.End.SumReceived.Bytes == 0 {
		t.Fatalf("iperf3 moved nothing: %s", out)
	}
	t.Logf("iperf3 %s → %s: %d bytes received, %d retransmits", client.Name, ip, res.End.SumReceived.Bytes, res.End.SumSent.Retransmits)
	return res.End.SumReceived.BitsPerSecond
}

// Ping sends five pings from namespace from to ip and fails the test
// unless every one is answered; it returns ping's summary line.
func Ping(t testing.TB, from *Netns, ip string) string {
	t.Helper()
	out, err := from.Output("ping", "-c", "5", "-i", "0.2", "-W", "2", ip)
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("ping %s from %s: %v\n%s", ip, from.Name, err, out)
	}
	out = strings.TrimSpace(out)
	return out[strings.LastIndex(out, "\n")+1:]
}
