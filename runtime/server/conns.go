package server

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// connLimit is a listener that keeps at most max connections open. One
// accepted past the cap is answered at once with a 503 (code
// too_many_connections) and closed, rather than left unaccepted in the
// kernel's backlog, where its client would wait without a word: a cap
// that refuses clearly is one a client can back off from.
type connLimit struct {
	net.Listener
	max     int
	slots   chan struct{}
	metrics *metrics
	// refusing bounds the refused connections being answered at once: a
	// flood of them is closed without an answer rather than costing a
	// goroutine and a descriptor each while it lingers.
	refusing chan struct{}
	refusals sync.WaitGroup
}

// refusalLinger is how long a refused connection may take to read its
// 503 before it is closed. Closing at once, with the client's request
// unread, would reset the connection and could lose the answer.
const refusalLinger = time.Second

func newConnLimit(ln net.Listener, max int, m *metrics) *connLimit {
	return &connLimit{Listener: ln, max: max, slots: make(chan struct{}, max), metrics: m, refusing: make(chan struct{}, 64)}
}

// Accept returns the next connection within the cap, refusing those past it.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.metrics.connection(1, false)
			return &limitedConn{Conn: c, l: l}, nil
		default:
			l.refuse(c)
		}
	}
}

func (l *connLimit) refuse(c net.Conn) {
	l.metrics.connection(0, true)
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	l.refusals.Add(1)
	go func() {
		defer func() { <-l.refusing; l.refusals.Done() }()
		defer c.Close()
		body := fmt.Sprintf(`{"error":{"message":"the server has %d connections open, its --max-connections; retry later","type":"server_error","code":"too_many_connections"}}`, l.max)
		c.SetDeadline(time.Now().Add(refusalLinger))
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n", len(body)+1, body)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		// Read what the client sent until it closes (having read the
		// answer) or the linger is over.
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}()
}

// wait returns once every refused connection has been closed.
func (l *connLimit) wait() { l.refusals.Wait() }

// limitedConn gives its slot back when it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

// CloseWrite lets net/http half-close a connection before closing it, as
// it does with a bare TCP connection so that a client's unread request
// does not reset the connection before the client reads the answer.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		c.l.metrics.connection(-1, false)
	})
	return err
}
