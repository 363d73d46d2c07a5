package valkeytest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestStartAndShared(t *testing.T) {
	ctx := context.Background()
	for name, addr := range map[string]string{"dedicated": Start(t), "shared": Shared(t)} {
		c := Client(t, addr)
		got, err := c.Do(ctx, c.B().Ping().Build()).ToString()
		if err != nil || got != "PONG" {
			t.Fatalf("%s: PING = %q, %v", name, got, err)
		}
	}
	if a, b := Shared(t), Shared(t); a != b {
		t.Fatalf("Shared returned two different servers: %s and %s", a, b)
	}
	p1, p2 := Prefix(t), Prefix(t)
	if p1 == p2 || strings.ContainsAny(p1, "{}") {
		t.Fatalf("prefixes %q and %q must differ and hold no braces", p1, p2)
	}
}

func TestStopTwice(t *testing.T) {
	srv, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Stop()
	if conn, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("server still accepts connections after Stop")
	}
}
