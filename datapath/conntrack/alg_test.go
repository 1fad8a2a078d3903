package conntrack

import (
	"strings"
	"testing"
)

// TestTFTPHelper: a read request committed with alg=tftp makes the
// server's answer, from a port of its own, a related connection (+rel
// both ways); another connection to the client is not.
func TestTFTPHelper(t *testing.T) {
	tr := New()
	tftp := Params{Commit: true, Helper: HelperTFTP}
	runSteps(t, tr, []step{
		{"read request", udpFrame(t, ipA, ipB, 5000, 69), tftp, 0, trk | nw},
		{"data from the server's own port", udpFrame(t, ipB, ipA, 6001, 5000), commit, 0, trk | nw | rel},
		{"the client's ack", udpFrame(t, ipA, ipB, 5000, 6001), Params{}, 0, trk | est | rel | rpl},
		{"more data", udpFrame(t, ipB, ipA, 6001, 5000), Params{}, 1, trk | est | rel},
		// Expected once: another port of the server is a stranger.
		{"a second answer", udpFrame(t, ipB, ipA, 6002, 5000), commit, 1, trk | nw},
		{"to another client port", udpFrame(t, ipB, ipA, 6003, 5001), commit, 1, trk | nw},
	})
	for _, e := range tr.Dump(nil, 0) {
		if s := e.String(); strings.Contains(s, ",dport=69)") != strings.HasSuffix(s, ",helper=tftp") {
			t.Errorf("dump-conntrack: %s", s)
		}
	}
	// Without the helper nothing is expected.
	tr = New()
	runSteps(t, tr, []step{
		{"read request", udpFrame(t, ipA, ipB, 5000, 69), commit, 0, trk | nw},
		{"data", udpFrame(t, ipB, ipA, 6001, 5000), commit, 0, trk | nw},
	})
}

// TestFTPHelper: the passive (227, 229) and active (PORT, EPRT) data
// connections an FTP control connection announces are +rel; an announced
// address other than the sender's (an FTP bounce) is not expected.
func TestFTPHelper(t *testing.T) {
	tr := New()
	ftp := Params{Commit: true, Helper: HelperFTP}
	ctl := func(fromClient bool, seq, ack uint32, data string) []byte {
		if fromClient {
			return tcpFrame(t, seg{src: ipA, dst: ipB, sport: 40000, dport: 21, seq: seq, ack: ack, ackf: true, data: []byte(data), wscale: -1})
		}
		return tcpFrame(t, seg{src: ipB, dst: ipA, sport: 21, dport: 40000, seq: seq, ack: ack, ackf: true, data: []byte(data), wscale: -1})
	}
	syn := func(src, dst []byte, sport, dport uint16) []byte {
		return tcpFrame(t, seg{src: src, dst: dst, sport: sport, dport: dport, seq: 7, syn: true, wscale: -1})
	}
	pasv := "227 Entering Passive Mode (198,18,0,2,19,137).\r\n" // port 5001
	epsv := "229 Entering Extended Passive Mode (|||5003|)\r\n"
	port := "PORT 198,18,0,1,19,138\r\n"   // 5002
	bounce := "PORT 198,18,0,9,19,139\r\n" // someone else's address
	eprt := "EPRT |1|198.18.0.1|5004|\r\n"
	c, s := uint32(100), uint32(300)
	runSteps(t, tr, []step{
		{"SYN", tcpFrame(t, seg{src: ipA, dst: ipB, sport: 40000, dport: 21, seq: c, syn: true, wscale: -1}), ftp, 0, trk | nw},
		{"SYN-ACK", tcpFrame(t, seg{src: ipB, dst: ipA, sport: 21, dport: 40000, seq: s, ack: c + 1, syn: true, ackf: true, wscale: -1}), Params{}, 0, trk | est | rpl},
		{"ACK", ctl(true, c+1, s+1, ""), Params{}, 0, trk | est},
		{"227", ctl(false, s+1, c+1, pasv), Params{}, 0, trk | est | rpl},
		{"passive data", syn(ipA, ipB, 40001, 5001), commit, 0, trk | nw | rel},
		{"229", ctl(false, s+1+uint32(len(pasv)), c+1, epsv), Params{}, 0, trk | est | rpl},
		{"extended passive data", syn(ipA, ipB, 40002, 5003), commit, 0, trk | nw | rel},
		{"PORT", ctl(true, c+1, s+1+uint32(len(pasv)+len(epsv)), port), Params{}, 0, trk | est},
		{"active data", syn(ipB, ipA, 20, 5002), commit, 0, trk | nw | rel},
		{"EPRT", ctl(true, c+1+uint32(len(port)), s+1+uint32(len(pasv)+len(epsv)), eprt), Params{}, 0, trk | est},
		{"extended active data", syn(ipB, ipA, 20, 5004), commit, 0, trk | nw | rel},
		{"PORT to another host", ctl(true, c+1+uint32(len(port)+len(eprt)), s+1+uint32(len(pasv)+len(epsv)), bounce), Params{}, 0, trk | est},
		{"the bounce", syn(ipB, []byte{198, 18, 0, 9}, 20, 5005), commit, 0, trk | nw},
		{"unannounced", syn(ipA, ipB, 40003, 5009), commit, 0, trk | nw},
	})
}
