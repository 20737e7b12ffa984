package testenv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The test node's cluster DNS: a small server of the harness on NodeIP:53
// (UDP and TCP) that knows only the Services' names. It answers A queries
// for <service>.<namespace>.svc.cluster.local. with the Service's
// ClusterIP, says NXDOMAIN for every other name under cluster.local, and
// refuses every name outside it: it forwards nothing anywhere, so no query
// leaves the node's namespace.
const (
	// ClusterDomain is the node's cluster domain (the kubelet's
	// clusterDomain).
	ClusterDomain = "cluster.local"
	// dnsTTL is the answers' TTL in seconds: short, Services come and go
	// within a test.
	dnsTTL = 5
)

// serviceLookup returns the addresses of a Service's name: its ClusterIP,
// or for a headless Service (ClusterIP None) the ready addresses of its
// endpoints, as the cluster DNS of Kubernetes answers; whether the Service
// exists; and an error when that cannot be told.
type serviceLookup func(ctx context.Context, namespace, name string) (addrs []string, found bool, err error)

// clusterName reads a query name: inCluster when it is cluster.local or
// under it, and then the Service and namespace when it is
// <service>.<namespace>.svc.cluster.local (both DNS labels, as Kubernetes
// names of Services and namespaces are; case does not matter).
func clusterName(name string) (service, namespace string, inCluster bool) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	const suffix = "." + ClusterDomain
	if n != ClusterDomain && !strings.HasSuffix(n, suffix) {
		return "", "", false
	}
	l := strings.Split(strings.TrimSuffix(n, suffix), ".")
	if len(l) != 3 || l[2] != "svc" || len(validation.IsDNS1123Label(l[0])) > 0 || len(validation.IsDNS1123Label(l[1])) > 0 {
		return "", "", true
	}
	return l[0], l[1], true
}

// dnsAnswer is the answer to a query: REFUSED for a name outside the
// cluster domain (nothing is forwarded), NXDOMAIN for a name under it that
// is no Service's, the Service's IPv4 addresses (serviceLookup) for an A
// query of its name, no record (NOERROR) for another type of query of it or
// when it has no address, SERVFAIL when the Service cannot be read. One question per
// query, opcode QUERY only, as resolvers send.
func dnsAnswer(ctx context.Context, q *dnsmessage.Message, lookup serviceLookup) dnsmessage.Message {
	r := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, OpCode: q.OpCode, RecursionDesired: q.RecursionDesired}}
	switch {
	case q.Response:
		r.RCode = dnsmessage.RCodeFormatError
		return r
	case q.OpCode != 0:
		r.RCode = dnsmessage.RCodeNotImplemented
		return r
	case len(q.Questions) != 1:
		r.RCode = dnsmessage.RCodeFormatError
		return r
	}
	qq := q.Questions[0]
	r.Questions = []dnsmessage.Question{qq}
	svc, ns, in := clusterName(qq.Name.String())
	if !in || qq.Class != dnsmessage.ClassINET {
		r.RCode = dnsmessage.RCodeRefused
		return r
	}
	if svc == "" {
		r.Authoritative, r.RCode = true, dnsmessage.RCodeNameError
		return r
	}
	addrs, found, err := lookup(ctx, ns, svc)
	switch {
	case err != nil:
		r.RCode = dnsmessage.RCodeServerFailure
		return r
	case !found:
		r.Authoritative, r.RCode = true, dnsmessage.RCodeNameError
		return r
	}
	r.Authoritative = true
	if qq.Type != dnsmessage.TypeA {
		return r
	}
	for _, ip := range addrs {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			continue
		}
		r.Answers = append(r.Answers, dnsmessage.Resource{
			Header: dnsmessage.ResourceHeader{Name: qq.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL},
			Body:   &dnsmessage.AResource{A: a.As4()},
		})
	}
	return r
}

// kubeServices looks Services (and a headless one's EndpointSlices) up in
// the kube-apiserver, each query afresh.
func kubeServices(c client.Client) serviceLookup {
	return func(ctx context.Context, namespace, name string) ([]string, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		if s.Spec.ClusterIP != corev1.ClusterIPNone {
			if s.Spec.ClusterIP == "" {
				return nil, true, nil
			}
			return []string{s.Spec.ClusterIP}, true, nil
		}
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return nil, false, err
		}
		return readyAddresses(slices.Items), true, nil
	}
}

// readyAddresses are the IPv4 addresses of the ready endpoints of a
// headless Service's EndpointSlices (an endpoint without a ready
// condition counts as ready), each once, sorted.
func readyAddresses(slices []discoveryv1.EndpointSlice) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// DNSQuery is a query the node's DNS server answered.
type DNSQuery struct {
	// From is the client's address.
	From netip.Addr
	// Name is the question's name, as asked (fully qualified).
	Name string
	Type dnsmessage.Type
	// RCode is the answer's code; Answer the first address answered,
	// if any.
	RCode  dnsmessage.RCode
	Answer netip.Addr
}

// DNS is the node's DNS server (see ClusterDomain).
type DNS struct {
	// Addr is where it listens, UDP and TCP.
	Addr string

	lookup  serviceLookup
	udp     net.PacketConn
	tcp     net.Listener
	log     io.WriteCloser
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	queries []DNSQuery
}

// startDNS starts a DNS server on addr (UDP and TCP) answering from
// lookup, each query logged to logFile (names and addresses only).
func startDNS(addr string, lookup serviceLookup, logFile string) (*DNS, error) {
	udp, err := net.ListenPacket("udp4", addr) //nolint:noctx // the server runs until Stop
	if err != nil {
		return nil, fmt.Errorf("the node's DNS server: %w", err)
	}
	tcp, err := net.Listen("tcp4", udp.LocalAddr().String()) //nolint:noctx // the server runs until Stop
	if err != nil {
		_ = udp.Close()
		return nil, fmt.Errorf("the node's DNS server: %w", err)
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // the run's own log
	if err != nil {
		_, _ = udp.Close(), tcp.Close()
		return nil, err
	}
	d := &DNS{Addr: udp.LocalAddr().String(), lookup: lookup, udp: udp, tcp: tcp, log: f}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(2)
	go d.serveUDP()
	go d.serveTCP()
	return d, nil
}

// Queries returns the queries answered so far.
func (d *DNS) Queries() []DNSQuery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DNSQuery(nil), d.queries...)
}

// Stop closes the server's sockets and waits for its goroutines.
func (d *DNS) Stop() {
	if d == nil {
		return
	}
	d.cancel()
	_, _ = d.udp.Close(), d.tcp.Close()
	d.wg.Wait()
	_ = d.log.Close()
}

// handle answers one query in wire format; nil when it cannot be parsed
// enough to answer (its header is unreadable).
func (d *DNS) handle(from netip.Addr, b []byte) []byte {
	var q dnsmessage.Message
	if err := q.Unpack(b); err != nil {
		var p dnsmessage.Parser
		h, herr := p.Start(b)
		if herr != nil {
			return nil
		}
		q = dnsmessage.Message{Header: h}
		q.Questions = []dnsmessage.Question{{}, {}} // unparseable: a format error
	}
	r := dnsAnswer(d.ctx, &q, d.lookup)
	e := DNSQuery{From: from.Unmap(), RCode: r.RCode}
	if len(r.Questions) == 1 {
		e.Name, e.Type = r.Questions[0].Name.String(), r.Questions[0].Type
	}
	if len(r.Answers) > 0 {
		if a, ok := r.Answers[0].Body.(*dnsmessage.AResource); ok {
			e.Answer = netip.AddrFrom4(a.A)
		}
	}
	d.mu.Lock()
	d.queries = append(d.queries, e)
	_, _ = fmt.Fprintf(d.log, "%s %s %s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), e.From, e.Name, e.Type, e.RCode, e.Answer)
	d.mu.Unlock()
	out, err := r.Pack()
	if err != nil {
		return nil
	}
	return out
}

func (d *DNS) serveUDP() {
	defer d.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, from, err := d.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		ua, _ := from.(*net.UDPAddr)
		if ua == nil {
			continue
		}
		if out := d.handle(ua.AddrPort().Addr(), buf[:n]); out != nil {
			_, _ = d.udp.WriteTo(out, from)
		}
	}
}

func (d *DNS) serveTCP() {
	defer d.wg.Done()
	for {
		c, err := d.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer c.Close() //nolint:errcheck // the answer is written or not
			stop := context.AfterFunc(d.ctx, func() { _ = c.Close() })
			defer stop()
			ta, _ := c.RemoteAddr().(*net.TCPAddr)
			var from netip.Addr
			if ta != nil {
				from = ta.AddrPort().Addr()
			}
			for {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				b := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				out := d.handle(from, b)
				if out == nil {
					return
				}
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err != nil { //nolint:gosec // a DNS message is at most 64 KiB
					return
				}
			}
		}()
	}
}
