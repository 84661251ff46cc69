package controller

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// startAppliance serves a minimal oracle-operations-v1 application on sock.
// TEMPORARY: replaced by the real package appliance once it lands.
func startAppliance(t testing.TB, sock, state string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	desc := map[string]any{"id": "text.sha256", "title": "SHA-256", "description": "hash", "availability": "live_direct",
		"input_schema": map[string]any{"type": "object"}, "units": []string{}, "sources": []string{}, "examples": []any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/operations", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"operations": []any{desc}, "next_offset": nil, "limits": map[string]any{"request_bytes": 65536}})
	})
	mux.HandleFunc("GET /v1/operations/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "text.sha256" {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no such operation"}}`)
			return
		}
		json.NewEncoder(w).Encode(desc)
	})
	mux.HandleFunc("POST /v1/invoke", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			RequestID string `json:"requestId"`
		}
		json.Unmarshal(b, &body)
		mu.Lock()
		prev, ok := seen[body.RequestID]
		if !ok {
			seen[body.RequestID] = string(b)
		}
		mu.Unlock()
		if ok && prev != string(b) {
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"conflict","message":"requestId reused"}}`)
			return
		}
		io.WriteString(w, `{"operationId":"text.sha256","result":{"len":`+itoa(len(b))+`}}`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
