package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
)

// linkQueue is a link's outbound queue length; a full queue kills the link
// (the reports stay pending and are resent on the next one).
const linkQueue = 4096

// ErrRefused wraps a coordinator's permanent refusal (bad token, histogram
// mismatch); Run returns it instead of reconnecting.
var ErrRefused = errors.New("coordinator refused the agent")

// link is one established stream as the loop sees it.
type link struct {
	welcome welcome
	in      chan any      // inbound messages; the receiver closes done when the stream ends
	out     chan any      // outbound messages, written by the loop only
	done    chan struct{} // closed once when the link is dead
	once    sync.Once
	closing chan struct{} // closed by closeSend: send what is queued, then close
	flushed chan struct{} // closed by the sender when it has finished
}

func newLink(w welcome) *link {
	return &link{
		welcome: w, in: make(chan any, 64), out: make(chan any, linkQueue),
		done: make(chan struct{}), closing: make(chan struct{}), flushed: make(chan struct{}),
	}
}

func (lk *link) kill() { lk.once.Do(func() { close(lk.done) }) }

// send queues m without blocking.
func (lk *link) send(m any) {
	select {
	case lk.out <- m:
	case <-lk.done:
	default:
		lk.kill()
	}
}

// closeSend lets the sender flush the queue and half-close the stream,
// waiting at most timeout.
func (lk *link) closeSend(timeout time.Duration) {
	close(lk.closing)
	select {
	case <-lk.flushed:
	case <-time.After(timeout):
	}
	lk.kill()
}

// tokenCreds attaches the shared token to every RPC.
type tokenCreds struct {
	token  string
	secure bool
}

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if c.token == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + c.token}, nil
}

func (c tokenCreds) RequireTransportSecurity() bool { return c.secure }

// verifyingCreds wraps the client's TLS credentials to remember a failure
// to verify the coordinator's certificate: gRPC reports it only as an
// unavailable connection and would retry forever, but a certificate the CA
// does not vouch for is a configuration error, not a transient one.
type verifyingCreds struct {
	credentials.TransportCredentials
	failed *atomic.Pointer[error]
}

func (c verifyingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		c.failed.Store(&err)
	}
	return conn, info, err
}

func (c verifyingCreds) Clone() credentials.TransportCredentials {
	return verifyingCreds{TransportCredentials: c.TransportCredentials.Clone(), failed: c.failed}
}

// certFailure returns the last certificate verification failure, if any.
func (a *Agent) certFailure() error {
	if p := a.certErr.Load(); p != nil {
		return *p
	}
	return nil
}

// newClient builds the gRPC client connection (it dials lazily and
// redials on its own; streams are opened by connect).
func (a *Agent) newClient() (*grpc.ClientConn, error) {
	secure := a.cfg.CAFile != ""
	opts := []grpc.DialOption{
		grpc.WithPerRPCCredentials(tokenCreds{token: a.cfg.Token, secure: secure}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	}
	if secure {
		pem, err := os.ReadFile(a.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read CA file %s: no certificate found", a.cfg.CAFile)
		}
		opts = append(opts, grpc.WithTransportCredentials(verifyingCreds{
			TransportCredentials: credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: a.cfg.ServerName, MinVersion: tls.VersionTLS12}),
			failed:               &a.certErr,
		}))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if a.dial != nil {
		opts = append(opts, grpc.WithContextDialer(a.dial))
	}
	cc, err := grpc.NewClient(a.cfg.Coordinator, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial coordinator: %w", err)
	}
	return cc, nil
}

// connect opens streams until ctx is done, handing each to the loop and
// reconnecting with capped exponential backoff when one ends. A permanent
// refusal goes to fatal.
func (a *Agent) connect(ctx context.Context, cc *grpc.ClientConn, links chan<- *link, fatal chan<- error) {
	client := pb.NewCoordinatorServiceClient(cc)
	attempt := 0
	for ctx.Err() == nil {
		began := time.Now()
		err := a.stream(ctx, client, links)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrRefused) {
			fatal <- err
			return
		}
		if cerr := a.certFailure(); cerr != nil {
			fatal <- fmt.Errorf("%w: the coordinator's certificate is not signed by the CA in %s: %w", ErrRefused, a.cfg.CAFile, cerr)
			return
		}
		if time.Since(began) > 10*a.cfg.BackoffMax {
			attempt = 0 // the last link was healthy
		}
		d := backoff(attempt, a.cfg.BackoffBase, a.cfg.BackoffMax, rand.Float64())
		attempt++
		a.logger.Warn("coordinator stream ended, reconnecting", "error", err, "in", d, "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stream runs one stream: hello, welcome, then pumps messages both ways
// until either side fails.
func (a *Agent) stream(ctx context.Context, client pb.CoordinatorServiceClient, links chan<- *link) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := client.Connect(sctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	h := hello{ID: a.cfg.ID, Index: a.cfg.Index, Capacity: a.cfg.Capacity, Version: a.cfg.Version, Incarnation: a.incarnation}
	if err := st.Send(helloToPB(h, a.cfg.Histogram)); err != nil {
		return fmt.Errorf("send hello: %w", refusal(err))
	}
	first, err := st.Recv()
	if err != nil {
		return fmt.Errorf("receive welcome: %w", refusal(err))
	}
	w, ok := first.GetMsg().(*pb.ConnectResponse_Welcome)
	if !ok {
		return fmt.Errorf("receive welcome: got %T", first.GetMsg())
	}
	lk := newLink(welcomeFromPB(w.Welcome))
	select {
	case links <- lk:
	case <-ctx.Done():
		return ctx.Err()
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lk.flushed)
		for {
			select {
			case m := <-lk.out:
				if err := st.Send(requestToPB(m)); err != nil {
					lk.kill()
					return
				}
			case <-lk.closing:
				for {
					select {
					case m := <-lk.out:
						if st.Send(requestToPB(m)) != nil {
							return
						}
					default:
						_ = st.CloseSend()
						return
					}
				}
			case <-lk.done:
				return
			}
		}
	})
	go func() {
		// Recv cannot be interrupted except by cancelling the stream.
		<-lk.done
		cancel()
	}()
	for {
		in, err := st.Recv()
		if err != nil {
			lk.kill()
			wg.Wait()
			return refusal(err)
		}
		m, err := responseFromPB(in)
		if err != nil {
			a.logger.Warn("convert coordinator message", "error", err)
			continue
		}
		select {
		case lk.in <- m:
		case <-lk.done:
			wg.Wait()
			return errors.New("link closed")
		}
	}
}

// refusal marks permanent refusals so connect stops retrying.
func refusal(err error) error {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.FailedPrecondition, codes.PermissionDenied, codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrRefused, status.Convert(err).Message())
	}
	return err
}
