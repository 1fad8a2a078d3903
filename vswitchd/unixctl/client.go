package unixctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// MaxReply bounds one reply a Client reads (a dump of a large datapath
// can be several MiB).
const MaxReply = 64 << 20

// ServerError is a command's error reply, as opposed to a failure to
// reach the server or to speak with it.
type ServerError struct{ Text string }

func (e *ServerError) Error() string { return e.Text }

// Call connects to the control socket at path, runs one command and
// returns its text: what ovs-appctl does, for clients (and tests) that
// link Go rather than run ovs-appctl.
func Call(ctx context.Context, path, method string, args ...string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Time{})
	}
	if args == nil {
		args = []string{}
	}
	req := struct {
		Method string   `json:"method"`
		Params []string `json:"params"`
		ID     int      `json:"id"`
	}{method, args, 0}
	if err := json.NewEncoder(c).Encode(&req); err != nil {
		return "", err
	}
	br := &boundedReader{r: c, limit: MaxReply}
	var rep struct {
		ID     json.RawMessage `json:"id"`
		Result *string         `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(br).Decode(&rep); err != nil {
		return "", fmt.Errorf("reading reply: %w", err)
	}
	if len(rep.Error) > 0 && string(rep.Error) != "null" {
		var text string
		if json.Unmarshal(rep.Error, &text) != nil {
			text = string(rep.Error)
		}
		return "", &ServerError{Text: text}
	}
	if rep.Result == nil {
		return "", errors.New("reply has neither result nor error")
	}
	return *rep.Result, nil
}
