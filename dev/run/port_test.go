package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestListenSaysWhoHoldsThePort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port

	ln, err := listen("127.0.0.1", port)
	if err == nil {
		ln.Close()
		t.Fatal("got a listener on a port in use, want an error")
	}
	want := fmt.Sprintf("port %d is in use by pid %d (", port, os.Getpid())
	if runtime.GOOS != "linux" {
		want = fmt.Sprintf("port %d is ", port)
	}
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "is make run already running?") {
		t.Errorf("got %q, want it to start with %q and ask whether make run is already running", err, want)
	}

	held.Close()
	ln, err = listen("127.0.0.1", port)
	if err != nil {
		t.Fatalf("a freed port: got %v, want a listener", err)
	}
	ln.Close()
}
