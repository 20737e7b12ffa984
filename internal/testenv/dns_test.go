package testenv

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// services is a fake Service lookup for the pure core: ns/name → addresses.
func services(m map[string][]string) serviceLookup {
	return func(_ context.Context, ns, name string) ([]string, bool, error) {
		if ns == "broken" {
			return nil, false, errors.New("the apiserver is away")
		}
		ips, ok := m[ns+"/"+name]
		return ips, ok, nil
	}
}

var testServices = services(map[string][]string{
	"openbao/openbao":                   {"10.96.0.20"},
	"crossplane-system/function-tenant": {"10.244.0.7", "10.244.0.8"},
	"default/no-ready-endpoint":         nil,
	"default/dual-stack":                {"fd00::1", "10.96.0.50"},
})

func query(name string, typ dnsmessage.Type) *dnsmessage.Message {
	return &dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 42, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}},
	}
}

// answer is what a test looks at in an answer.
type answer struct {
	ID            uint16
	RCode         dnsmessage.RCode
	Authoritative bool
	Questions     int
	A             []string
}

func summary(m dnsmessage.Message) answer {
	a := answer{ID: m.ID, RCode: m.RCode, Authoritative: m.Authoritative, Questions: len(m.Questions)}
	if !m.Response {
		a.RCode = 99 // not a response: never expected
	}
	for _, r := range m.Answers {
		if b, ok := r.Body.(*dnsmessage.AResource); ok {
			a.A = append(a.A, r.Header.Name.String()+" "+netip.AddrFrom4(b.A).String())
		}
	}
	return a
}

func TestDNSAnswer(t *testing.T) {
	other := query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeA)
	other.Questions = append(other.Questions, other.Questions[0])
	chaos := query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeA)
	chaos.Questions[0].Class = dnsmessage.ClassCHAOS
	notify := query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeA)
	notify.OpCode = 4
	resp := query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeA)
	resp.Response = true
	cases := map[string]struct {
		q    *dnsmessage.Message
		want answer
	}{
		"ServiceA":          {query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeSuccess, true, 1, []string{"openbao.openbao.svc.cluster.local. 10.96.0.20"}}},
		"CaseDoesNotMatter": {query("OpenBao.OPENBAO.svc.Cluster.Local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeSuccess, true, 1, []string{"OpenBao.OPENBAO.svc.Cluster.Local. 10.96.0.20"}}},
		"HeadlessService": {query("function-tenant.crossplane-system.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeSuccess, true, 1, []string{
			"function-tenant.crossplane-system.svc.cluster.local. 10.244.0.7", "function-tenant.crossplane-system.svc.cluster.local. 10.244.0.8"}}},
		"IPv4Only":            {query("dual-stack.default.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeSuccess, true, 1, []string{"dual-stack.default.svc.cluster.local. 10.96.0.50"}}},
		"ServiceAAAAIsNoData": {query("openbao.openbao.svc.cluster.local.", dnsmessage.TypeAAAA), answer{42, dnsmessage.RCodeSuccess, true, 1, nil}},
		"NoAddressIsNoData":   {query("no-ready-endpoint.default.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeSuccess, true, 1, nil}},
		"NoSuchService":       {query("nope.openbao.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"NoSuchNamespace":     {query("openbao.nope.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		// The resolver's search list: the pod's namespace first.
		"SearchCandidate":       {query("openbao.openbao.svc.crossplane-system.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"NamespaceOnly":         {query("openbao.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"PodRecord":             {query("10-244-0-5.default.pod.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"TheDomainItself":       {query("cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"NotALabel":             {query("open_bao.openbao.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeNameError, true, 1, nil}},
		"ApiserverAway":         {query("x.broken.svc.cluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeServerFailure, false, 1, nil}},
		"OutsideIsRefused":      {query("example.com.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"ShortNameIsRefused":    {query("openbao.openbao.svc.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"LookalikeIsRefused":    {query("openbao.openbao.svc.evilcluster.local.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"SuffixedIsRefused":     {query("openbao.openbao.svc.cluster.local.example.com.", dnsmessage.TypeA), answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"RootIsRefused":         {query(".", dnsmessage.TypeNS), answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"OtherClassIsRefused":   {chaos, answer{42, dnsmessage.RCodeRefused, false, 1, nil}},
		"TwoQuestions":          {other, answer{42, dnsmessage.RCodeFormatError, false, 0, nil}},
		"NotAQuery":             {notify, answer{42, dnsmessage.RCodeNotImplemented, false, 0, nil}},
		"AResponseIsNoQuestion": {resp, answer{42, dnsmessage.RCodeFormatError, false, 0, nil}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summary(dnsAnswer(context.Background(), tc.q, testServices))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
		})
	}
}

// The server on real sockets (UDP and TCP, on loopback), asked through
// Go's resolver with a search list as the node's resolv.conf has it: a
// Service's name resolves, a name outside the cluster domain is refused
// (nothing is forwarded), and each query is recorded.
func TestDNSServer(t *testing.T) {
	MajorIndependent(t)
	// Port 0 picks a free UDP port; the same TCP port may be taken by
	// another test package: try again then.
	var d *DNS
	var err error
	for range 5 {
		if d, err = startDNS("127.0.0.1:0", testServices, filepath.Join(t.TempDir(), "dns.log")); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, d.Addr)
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ips, err := r.LookupHost(ctx, "openbao.openbao.svc.cluster.local.")
			if err != nil || !cmp.Equal(ips, []string{"10.96.0.20"}) {
				t.Errorf("openbao.openbao.svc.cluster.local: %v, %v; want [10.96.0.20]", ips, err)
			}
			_, err = r.LookupHost(ctx, "nope.openbao.svc.cluster.local.")
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("nope.openbao.svc.cluster.local: %v, want not found", err)
			}
			_, err = r.LookupHost(ctx, "example.com.")
			if !errors.As(err, &de) || de.IsNotFound {
				t.Errorf("example.com: %v, want a failure that is no answer (refused)", err)
			}
		})
	}
	refused := 0
	for _, q := range d.Queries() {
		if q.From != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("query %+v: from %s, want 127.0.0.1", q, q.From)
		}
		if q.Name == "example.com." {
			if q.RCode != dnsmessage.RCodeRefused || q.Answer.IsValid() {
				t.Errorf("query %+v: want REFUSED with no answer", q)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no query of example.com. recorded: %+v", d.Queries())
	}
	found := false
	for _, q := range d.Queries() {
		if q.Name == "openbao.openbao.svc.cluster.local." && q.Type == dnsmessage.TypeA && q.Answer == netip.MustParseAddr("10.96.0.20") {
			found = true
		}
	}
	if !found {
		t.Errorf("no A query of openbao.openbao.svc.cluster.local. answered 10.96.0.20: %+v", d.Queries())
	}
}

// A headless Service's name answers its ready endpoints' IPv4 addresses.
func TestReadyAddresses(t *testing.T) {
	MajorIndependent(t)
	yes, no := true, false
	slices := []discoveryv1.EndpointSlice{
		{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{Addresses: []string{"10.244.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			{Addresses: []string{"10.244.0.4"}},
		}},
		{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}}}},
		{AddressType: discoveryv1.AddressTypeIPv6, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::9"}}}},
	}
	if d := cmp.Diff([]string{"10.244.0.4", "10.244.0.9"}, readyAddresses(slices)); d != "" {
		t.Errorf("ready addresses (-want +got):\n%s", d)
	}
}
