// Package jsonerrors makes the local server answer malformed requests the
// way the API answers every error: {"code": <status>, "message": "..."}
// with Content-Type application/json.
//
// net/http answers some requests itself, before any handler runs, in plain
// text: a request target it cannot parse (GET /api/slaves/slave/%zz/details),
// a malformed request line, a missing or malformed Host header, an invalid
// header, headers over the server's MaxHeaderBytes (431), an unsupported
// protocol version (505) or transfer encoding (501), and an Expect header
// other than 100-continue (417, with no body). API Gateway never lets such
// a request reach a function, so the handlers cannot be the ones to answer;
// Listener rewrites those answers on their way to the client instead.
//
// Rewriting what net/http writes, rather than reading each request line
// ahead of the server, leaves all HTTP parsing to net/http: the server
// keeps its keep-alive connections, and no second parser can disagree with
// it about what is malformed. net/http writes each of these answers in one
// Write on the connection, in a form no handler's answer has (no Date
// header, Content-Type before Connection), which is what Listener looks
// for; its tests send each case as raw bytes, so a change of that form in
// a later Go release shows up as a failing test.
package jsonerrors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetops/fleet/shared/web"
)

// Listener returns ln with net/http's own answers on its connections
// turned into JSON errors. Serve an http.Server on it.
func Listener(ln net.Listener) net.Listener {
	return listener{ln}
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c}, nil
}

// conn rewrites the answers net/http writes itself.
type conn struct{ net.Conn }

func (c *conn) Write(p []byte) (int, error) {
	out, ok := rewrite(p)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite half-closes the connection as net/http does on a TCP one after
// answering oversized headers, so that the client reads the answer before
// the connection closes.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// plainHeaders follow the status line of every plain-text answer net/http
// writes itself.
const plainHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// expectationFailed starts net/http's answer to an Expect header it does
// not support, which it writes with no body; no route answers 417.
const expectationFailed = "HTTP/1.1 417 Expectation Failed\r\n"

// rewrite returns the JSON error for an answer net/http wrote itself, and
// false for anything else.
func rewrite(p []byte) ([]byte, bool) {
	if bytes.HasPrefix(p, []byte(expectationFailed)) && bytes.HasSuffix(p, []byte("\r\n\r\n")) {
		return answer(http.StatusExpectationFailed, "the Expect header supports only 100-continue"), true
	}
	i := bytes.Index(p, []byte(plainHeaders))
	if i < 0 {
		return nil, false
	}
	statusLine, body := string(p[:i]), string(p[i+len(plainHeaders):])
	rest, ok := strings.CutPrefix(statusLine, "HTTP/1.1 ")
	if !ok || len(rest) < 4 || rest[3] != ' ' || strings.ContainsAny(rest, "\r\n") {
		return nil, false
	}
	code, err := strconv.Atoi(rest[:3])
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	return answer(code, message(code, body)), true
}

// message says what was wrong, from the plain-text body: "400 Bad Request:
// malformed Host header" says it after the status, "Unsupported transfer
// encoding" instead of it, "400 Bad Request" not at all.
func message(code int, body string) string {
	msg := strings.TrimPrefix(body, fmt.Sprintf("%d %s", code, http.StatusText(code)))
	msg = strings.TrimSpace(strings.TrimPrefix(msg, ":"))
	switch {
	case msg != "":
		return strings.ToLower(msg[:1]) + msg[1:]
	case code == http.StatusBadRequest:
		return "malformed HTTP request: its request line, target or headers cannot be read"
	}
	return strings.ToLower(http.StatusText(code))
}

// answer is a complete HTTP response carrying the JSON error. The
// connection closes after it, as it did after net/http's answer.
func answer(code int, msg string) []byte {
	body, _ := json.Marshal(web.ErrorBody{Code: code, Message: msg})
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", code, http.StatusText(code), len(body), body)
}
