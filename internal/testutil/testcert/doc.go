// Package testcert makes throw-away certificate authorities and server
// certificates for tests of TLS connections on loopback. It is for tests
// only: keys are short-lived and written unencrypted, and no non-test code
// may import it.
package testcert
