// Command go-gorilla is a websocket-shootout server (the protocol of
// hashrocket/websocket-shootout) on gorilla/websocket, the peer `herald
// bench broadcast|echo` compares Herald with.
//
//	go run . -port 3001 [-host 127.0.0.1]
//
// Text frames are JSON mode: {"type":"echo"|"broadcast","payload":P}; echo
// answers with the same object, broadcast sends {"type":"broadcast",
// "payload":P} to every client (the sender included), then
// {"type":"broadcastResult","payload":P} to the sender. The payload is
// passed through as raw JSON, never re-encoded. Binary frames are binary
// mode (round 2): byte 0 is 'e' or 'b'; echo sends the frame back,
// broadcast sends it to everyone, then a copy with byte 0 set to 'r' to the
// sender. Any path is accepted.
//
// The design is the usual gorilla one: a goroutine per connection reading,
// one writer goroutine per connection draining a buffered channel, and a
// broadcast that prepares the frame once (websocket.PreparedMessage) and
// queues it to every connection. A connection whose queue is full is
// dropped, so one slow client cannot stall everyone; `herald bench`
// would then report the failure.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
)

type conn struct {
	ws   *websocket.Conn
	send chan *websocket.PreparedMessage
}

type hub struct {
	mu    sync.RWMutex
	conns map[*conn]struct{}
}

func (h *hub) add(c *conn) {
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(c *conn) {
	h.mu.Lock()
	if _, ok := h.conns[c]; ok {
		delete(h.conns, c)
		close(c.send)
	}
	h.mu.Unlock()
}

// sendTo queues pm to c unless c has been dropped (its channel closed).
func (h *hub) sendTo(c *conn, pm *websocket.PreparedMessage) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if _, ok := h.conns[c]; !ok {
		return false
	}
	select {
	case c.send <- pm:
		return true
	default:
		return false
	}
}

func (h *hub) broadcast(pm *websocket.PreparedMessage) {
	var slow []*conn
	h.mu.RLock()
	for c := range h.conns {
		select {
		case c.send <- pm:
		default:
			slow = append(slow, c)
		}
	}
	h.mu.RUnlock()
	for _, c := range slow {
		h.remove(c)
		c.ws.Close()
	}
}

type message struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 1024,
	CheckOrigin:     func(*http.Request) bool { return true },
}

func prepare(kind int, data []byte) *websocket.PreparedMessage {
	pm, err := websocket.NewPreparedMessage(kind, data)
	if err != nil {
		log.Fatal(err)
	}
	return pm
}

func (h *hub) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, send: make(chan *websocket.PreparedMessage, 256)}
	// Join before reading anything, so a broadcast sent right after the
	// upgrade reaches this connection.
	h.add(c)
	go func() {
		for pm := range c.send {
			if err := ws.WritePreparedMessage(pm); err != nil {
				break
			}
		}
		ws.Close()
	}()
	defer func() {
		h.remove(c)
		ws.Close()
	}()
	for {
		kind, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if kind == websocket.BinaryMessage {
			if len(data) < 1 {
				return
			}
			switch data[0] {
			case 'e':
				if !h.sendTo(c, prepare(kind, data)) {
					return
				}
			case 'b':
				h.broadcast(prepare(kind, data))
				result := append([]byte(nil), data...)
				result[0] = 'r'
				if !h.sendTo(c, prepare(kind, result)) {
					return
				}
			default:
				log.Printf("unknown binary message type %q", data[0])
				return
			}
			continue
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			log.Printf("bad JSON: %v", err)
			return
		}
		switch m.Type {
		case "echo":
			if !h.sendTo(c, prepare(kind, data)) {
				return
			}
		case "broadcast":
			out, _ := json.Marshal(message{Type: "broadcast", Payload: m.Payload})
			h.broadcast(prepare(kind, out))
			res, _ := json.Marshal(message{Type: "broadcastResult", Payload: m.Payload})
			if !h.sendTo(c, prepare(kind, res)) {
				return
			}
		default:
			log.Printf("unknown message type %q", m.Type)
			return
		}
	}
}

func main() {
	port := flag.Int("port", 3001, "port to listen on")
	host := flag.String("host", "127.0.0.1", "address to listen on")
	flag.Parse()
	h := &hub{conns: make(map[*conn]struct{})}
	addr := fmt.Sprintf("%s:%d", *host, *port)
	log.Printf("go-gorilla shootout server listening on ws://%s/", addr)
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(h.serve)))
}
