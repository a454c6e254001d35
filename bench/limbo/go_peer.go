// go_peer.go: x509-limbo cases through Go's crypto/x509 Certificate.Verify,
// set up as limbo's harness/gocryptox509/main.go does: Roots = trusted certs,
// Intermediates = untrusted intermediates (AppendCertsFromPEM, which skips
// what it cannot parse), DNSName = the DNS name or "[ip]", CurrentTime = the
// validation time (null = now), KeyUsages = the case's EKUs (serverAuth when
// it lists none). crypto/x509 takes no CRLs. A peer certificate that does not
// parse is a FAILURE verdict, as in limbo.
// Usage: go_peer SUITE.json > verdicts.tsv   (standard library only)
package main

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

type peerName struct{ Kind, Value string }

type testcase struct {
	ID                     string    `json:"id"`
	TrustedCerts           []string  `json:"trusted_certs"`
	UntrustedIntermediates []string  `json:"untrusted_intermediates"`
	PeerCertificate        string    `json:"peer_certificate"`
	ValidationTime         *string   `json:"validation_time"`
	ExpectedPeerName       *peerName `json:"expected_peer_name"`
	ExtendedKeyUsage       []string  `json:"extended_key_usage"`
}

var ekus = map[string]x509.ExtKeyUsage{
	"anyExtendedKeyUsage": x509.ExtKeyUsageAny,
	"serverAuth":          x509.ExtKeyUsageServerAuth,
	"clientAuth":          x509.ExtKeyUsageClientAuth,
	"codeSigning":         x509.ExtKeyUsageCodeSigning,
	"emailProtection":     x509.ExtKeyUsageEmailProtection,
	"timeStamping":        x509.ExtKeyUsageTimeStamping,
	"OCSPSigning":         x509.ExtKeyUsageOCSPSigning,
}

// evaluate returns whether the chain verifies; err != nil is a harness error.
func evaluate(tc testcase) (ok bool, unparsable bool, err error) {
	now := time.Now()
	if tc.ValidationTime != nil {
		if now, err = time.Parse(time.RFC3339, *tc.ValidationTime); err != nil {
			return false, false, err
		}
	}
	block, rest := pem.Decode([]byte(tc.PeerCertificate))
	if block == nil || block.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) > 0 {
		return false, true, nil
	}
	peer, perr := x509.ParseCertificate(block.Bytes)
	if perr != nil {
		return false, true, nil
	}
	opts := x509.VerifyOptions{
		Roots:         x509.NewCertPool(),
		Intermediates: x509.NewCertPool(),
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	opts.Roots.AppendCertsFromPEM([]byte(strings.Join(tc.TrustedCerts, "\n")))
	opts.Intermediates.AppendCertsFromPEM([]byte(strings.Join(tc.UntrustedIntermediates, "\n")))
	if len(tc.ExtendedKeyUsage) > 0 {
		opts.KeyUsages = nil
		for _, e := range tc.ExtendedKeyUsage {
			opts.KeyUsages = append(opts.KeyUsages, ekus[e])
		}
	}
	if n := tc.ExpectedPeerName; n != nil {
		opts.DNSName = n.Value
		if n.Kind == "IP" {
			opts.DNSName = "[" + n.Value + "]"
		}
	}
	_, verr := peer.Verify(opts)
	return verr == nil, false, nil
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var suite struct{ Testcases []testcase }
	if err := json.Unmarshal(data, &suite); err != nil {
		panic(err)
	}
	fmt.Fprintf(os.Stderr, "version: Go %s crypto/x509\n", strings.TrimPrefix(runtime.Version(), "go"))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	errors, unparsable := 0, 0
	for _, tc := range suite.Testcases {
		ok, bad, err := evaluate(tc)
		if err != nil {
			errors++
			fmt.Fprintf(os.Stderr, "harness error: %s: %v\n", tc.ID, err)
		} else if bad {
			unparsable++
			fmt.Fprintf(os.Stderr, "unparsable input: %s\n", tc.ID)
		}
		verdict := "FAILURE"
		if ok {
			verdict = "SUCCESS"
		}
		fmt.Fprintf(out, "%s\t%s\n", tc.ID, verdict)
	}
	fmt.Fprintf(os.Stderr, "unparsable inputs (FAILURE): %d\nharness errors: %d\n", unparsable, errors)
}
