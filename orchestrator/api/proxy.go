package api

import (
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// ParseCIDRs parses a comma-separated list of networks ("10.0.0.0/8,
// 192.0.2.7"); a bare address is a network of one.
func ParseCIDRs(list string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip := net.ParseIP(f)
			if ip == nil {
				return nil, &net.ParseError{Type: "IP address or CIDR", Text: f}
			}
			bits := 8 * net.IPv6len
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 8*net.IPv4len
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// ipExtractor is how Echo finds the client's address: the connection's
// peer, or behind a trusted proxy the nearest untrusted address of
// X-Forwarded-For. Nothing else (loopback, private networks) is trusted by
// default.
func (s *Server) ipExtractor() echo.IPExtractor {
	if len(s.cfg.TrustedProxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range s.cfg.TrustedProxies {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// fromTrustedProxy reports whether r's connection comes from a trusted proxy.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, n := range s.cfg.TrustedProxies {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// isHTTPS reports whether the browser reached the server over HTTPS:
// directly, at an https:// PublicURL, or through a trusted proxy that says
// X-Forwarded-Proto: https.
func (s *Server) isHTTPS(r *http.Request) bool {
	if r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://") {
		return true
	}
	// A chain of proxies lists the schemes it saw; the first is the browser's.
	proto, _, _ := strings.Cut(r.Header.Get(echo.HeaderXForwardedProto), ",")
	return s.fromTrustedProxy(r) && strings.EqualFold(strings.TrimSpace(proto), "https")
}
