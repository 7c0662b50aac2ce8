package runtime

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// StartAll starts every node of cfg in this process (tests, benchmarks, and one-process demos);
// on error the nodes already started are closed.
func StartAll(cfg *Config, opts Options) ([]*Server, error) {
	var out []*Server
	for _, n := range cfg.Nodes {
		s, err := Start(cfg, n.ID, opts)
		if err != nil {
			CloseAll(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// CloseAll closes servers.
func CloseAll(servers []*Server) {
	for _, s := range servers {
		s.Close()
	}
}

// WithFreePorts rewrites every loopback host:port address in a configuration's TOML text to a
// port that is free now, so tests and parallel clusters do not collide. (A port can in principle
// be taken between this call and the listen; tests accept that small window.)
func WithFreePorts(text string) (string, error) {
	var b strings.Builder
	rest := text
	const host = "127.0.0.1:"
	// Every listener stays open until all ports are chosen: one closed at once lets the kernel
	// hand its port out again to the next, and two nodes were given the same address.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for {
		i := strings.Index(rest, host)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i+len(host)])
		rest = rest[i+len(host):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 0 {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("free port: %w", err)
		}
		held = append(held, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		b.WriteString(strconv.Itoa(port))
		rest = rest[j:]
	}
}
