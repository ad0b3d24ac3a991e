package coordinator

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
)

// ServerConfig is the gRPC side of a coordinator.
type ServerConfig struct {
	// Token is the shared secret every agent must present; empty disables
	// authentication (for loopback tests only). It is never logged.
	Token string
	// CertFile and KeyFile enable TLS when both are set.
	CertFile, KeyFile string
	// GracefulStop bounds how long Serve waits for streams to end.
	GracefulStop time.Duration
}

// ErrBadToken is what an agent with a wrong or missing token is told.
const badTokenMessage = "invalid or missing token: the agent's --token-file or FLEETBENCH_TOKEN must match the coordinator's"

// NewServer returns a gRPC server with the coordinator's service, the token
// check on every stream, optional TLS and keepalive enforcement. The caller
// serves and stops it (Serve does both, and warns about a token sent in
// clear text off loopback).
func (c *Coordinator) NewServer(sc ServerConfig) (*grpc.Server, error) {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainStreamInterceptor(tokenGuard{token: sc.Token}.stream),
		grpc.ChainUnaryInterceptor(tokenUnaryInterceptor(sc.Token)),
	}
	if sc.CertFile != "" || sc.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(sc.CertFile, sc.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	s := grpc.NewServer(opts...)
	c.Register(s)
	return s, nil
}

// Register adds the coordinator's service to s.
func (c *Coordinator) Register(s grpc.ServiceRegistrar) {
	pb.RegisterCoordinatorServiceServer(s, &service{c: c})
}

// Serve serves the coordinator on lis until ctx is done or run returns,
// then stops gracefully within sc.GracefulStop (default 5s). It warns when
// a token travels without TLS over a listener that is not loopback (on
// loopback it never leaves the machine).
func (c *Coordinator) Serve(ctx context.Context, lis net.Listener, sc ServerConfig) error {
	s, err := c.NewServer(sc)
	if err != nil {
		return err
	}
	if sc.Token != "" && sc.CertFile == "" && !isLoopback(lis.Addr()) {
		c.logger.Warn("serving without TLS: the token travels in clear text", "addr", lis.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve coordinator: %w", err)
	case <-ctx.Done():
	}
	grace := sc.GracefulStop
	if grace == 0 {
		grace = 5 * time.Second
	}
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(grace):
		s.Stop()
		<-stopped
	}
	// After a stop Serve returns nil (or ErrServerStopped when the stop
	// came first); anything else is a failure of the listener.
	err = <-errc
	c.conns.Wait()
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve coordinator: %w", err)
	}
	return nil
}

// isLoopback reports whether addr is a TCP address on a loopback
// interface.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// checkToken compares the bearer token in a request's metadata md with
// want in constant time.
func checkToken(md metadata.MD, want string) error {
	if want == "" {
		return nil
	}
	got := ""
	if v := md.Get("authorization"); len(v) == 1 {
		got, _ = strings.CutPrefix(v[0], "Bearer ")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return status.Error(codes.Unauthenticated, badTokenMessage)
	}
	return nil
}

// tokenGuard checks the token of every stream and call. Its methods are
// gRPC interceptors; the stream's context is the only one a stream
// interceptor gets.
type tokenGuard struct{ token string }

func (g tokenGuard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	if err := checkToken(md, g.token); err != nil {
		return err
	}
	return handler(srv, ss)
}

func tokenUnaryInterceptor(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if err := checkToken(md, token); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// service is the gRPC edge of a Coordinator.
type service struct {
	pb.UnimplementedCoordinatorServiceServer
	c *Coordinator
}

// Connect runs one agent stream: it admits the agent, then forwards its
// messages to the run loop (from a receiver goroutine) and sends the loop's
// messages and heartbeats (from this one).
func (s *service) Connect(stream pb.CoordinatorService_ConnectServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ph := first.GetHello()
	if ph == nil {
		return status.Error(codes.InvalidArgument, "the first message must be hello")
	}
	h := helloFromPB(ph)
	if h.ID == "" {
		return status.Error(codes.InvalidArgument, "hello: agent_id is required")
	}
	cn, err := s.c.join(ctx, h)
	switch {
	case errors.Is(err, ErrHistogramMismatch):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrRunOver):
		return status.Error(codes.Unavailable, "the run is over")
	case err != nil:
		return status.FromContextError(err).Err()
	}
	logger := s.c.logger.With("agent_id", h.ID)

	recvErr := make(chan error, 1)
	s.c.conns.Go(func() { recvErr <- s.receive(ctx, cn, stream, h) })
	beat := time.NewTimer(nextBeat(s.c.cfg.HeartbeatInterval))
	defer beat.Stop()
	for {
		var m any
		select {
		case m = <-cn.out:
		case <-beat.C:
			beat.Reset(nextBeat(s.c.cfg.HeartbeatInterval))
			m = heartbeat{}
		case err := <-recvErr:
			s.leave(cn, err)
			if err == nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return status.Convert(err).Err()
		case <-cn.kick:
			// Replaced by a newer stream, lost, or too slow to keep up.
			s.leave(cn, nil)
			return status.Error(codes.Aborted, "stream closed by the coordinator")
		case <-ctx.Done():
			s.leave(cn, ctx.Err())
			return nil
		}
		msg, err := responseToPB(m)
		if err != nil {
			logger.Error("convert message", "error", err)
			continue
		}
		if err := stream.Send(msg); err != nil {
			s.leave(cn, err)
			return err
		}
	}
}

// receive forwards inbound messages until the stream fails.
func (s *service) receive(ctx context.Context, cn *conn, stream pb.CoordinatorService_ConnectServer, h hello) error {
	for {
		in, err := stream.Recv()
		if err != nil {
			return err
		}
		m, err := messageFromPB(in, h.Histogram)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if err := s.c.submit(ctx, msgEvent{conn: cn, msg: m}); err != nil {
			return err
		}
	}
}

// leave tells the loop the stream ended; it never blocks past the run.
func (s *service) leave(cn *conn, err error) {
	select {
	case s.c.events <- leaveEvent{conn: cn, err: err}:
	case <-s.c.done:
	}
}
