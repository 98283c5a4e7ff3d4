package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"github.com/quic-go/quic-go/http3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	ferryv1alpha1 "ferry.test/grpc-go/gen/ferry/v1alpha1"
	"ferry.test/grpc-go/gen/ferry/v1alpha1/ferryv1alpha1connect"
	psdbv1alpha1 "ferry.test/grpc-go/gen/psdb/v1alpha1"
	"ferry.test/grpc-go/gen/psdb/v1alpha1/psdbv1alpha1connect"
)

// db is the service as the checks use it, whichever generated client is behind it.
// Errors are the library's own (a grpc status error or a *connect.Error).
type db interface {
	CreateSession(context.Context, *psdbv1alpha1.CreateSessionRequest) (*psdbv1alpha1.CreateSessionResponse, error)
	Execute(context.Context, *psdbv1alpha1.ExecuteRequest) (*psdbv1alpha1.ExecuteResponse, error)
	// StreamExecute calls onMsg for every message, in order, and returns the end-of-stream error.
	StreamExecute(context.Context, *psdbv1alpha1.ExecuteRequest, func(*psdbv1alpha1.ExecuteResponse)) error
	Prepare(context.Context, *psdbv1alpha1.PrepareRequest) (*psdbv1alpha1.PrepareResponse, error)
	CloseSession(context.Context, *psdbv1alpha1.CloseSessionRequest) (*psdbv1alpha1.CloseSessionResponse, error)
	// Ferry's own service (ferry.v1alpha1.Database), on the same connection.
	ExecuteBatch(context.Context, *ferryv1alpha1.ExecuteBatchRequest) (*ferryv1alpha1.ExecuteBatchResponse, error)
}

// codeOf is the RPC status of err as connect-go names it ("deadline_exceeded", ...):
// gRPC and Connect share the numbering, so one name fits both libraries.
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String()
	}
	if st, ok := status.FromError(err); ok {
		return connect.Code(st.Code()).String()
	}
	return "unknown"
}

func describe(err error) string {
	if err == nil {
		return "<nil>"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("connect error code=%s message=%q", ce.Code(), ce.Message())
	}
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("grpc status code=%s message=%q", codeOf(err), st.Message())
	}
	return err.Error()
}

// wireStats is what the HTTP layer saw, summed over a variant's calls.
type wireStats struct {
	mu          sync.Mutex
	calls       int
	proto       map[string]int // HTTP version of the answers
	reqEnc      map[string]int // request message encoding
	respEnc     map[string]int // answer message encoding (header)
	contentType map[string]int // answer content type
	msgsIn      int            // gRPC messages received (grpc-go only)
	msgsInGzip  int            // ... of them compressed
}

func newWireStats() *wireStats {
	return &wireStats{proto: map[string]int{}, reqEnc: map[string]int{}, respEnc: map[string]int{}, contentType: map[string]int{}}
}

func orIdentity(s string) string {
	if s == "" {
		return "identity"
	}
	return s
}

func show(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// ---- grpc-go ----

// grpcCreds sends Basic credentials as gRPC per-RPC metadata, over TLS only.
type grpcCreds string

func (c grpcCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(c)}, nil
}
func (grpcCreds) RequireTransportSecurity() bool { return true }

// grpcStats is a grpc-go stats handler recording the encodings of each call.
type grpcStats struct{ w *wireStats }

func (h grpcStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h grpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (h grpcStats) HandleConn(context.Context, stats.ConnStats) {}
func (h grpcStats) HandleRPC(_ context.Context, s stats.RPCStats) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	switch s := s.(type) {
	case *stats.OutHeader:
		h.w.calls++
		h.w.proto["HTTP/2.0"]++ // grpc-go speaks nothing else
		h.w.reqEnc[orIdentity(s.Compression)]++
	case *stats.InHeader:
		h.w.respEnc[orIdentity(s.Compression)]++
	case *stats.InPayload:
		h.w.msgsIn++
		if s.CompressedLength != s.Length {
			h.w.msgsInGzip++
		}
	}
}

type grpcDB struct {
	c     psdbv1alpha1.DatabaseClient
	batch ferryv1alpha1.DatabaseClient
	opts  []grpc.CallOption
}

func (g grpcDB) ExecuteBatch(ctx context.Context, r *ferryv1alpha1.ExecuteBatchRequest) (*ferryv1alpha1.ExecuteBatchResponse, error) {
	return g.batch.ExecuteBatch(ctx, r, g.opts...)
}

func (g grpcDB) CreateSession(ctx context.Context, r *psdbv1alpha1.CreateSessionRequest) (*psdbv1alpha1.CreateSessionResponse, error) {
	return g.c.CreateSession(ctx, r, g.opts...)
}
func (g grpcDB) Execute(ctx context.Context, r *psdbv1alpha1.ExecuteRequest) (*psdbv1alpha1.ExecuteResponse, error) {
	return g.c.Execute(ctx, r, g.opts...)
}
func (g grpcDB) Prepare(ctx context.Context, r *psdbv1alpha1.PrepareRequest) (*psdbv1alpha1.PrepareResponse, error) {
	return g.c.Prepare(ctx, r, g.opts...)
}
func (g grpcDB) CloseSession(ctx context.Context, r *psdbv1alpha1.CloseSessionRequest) (*psdbv1alpha1.CloseSessionResponse, error) {
	return g.c.CloseSession(ctx, r, g.opts...)
}
func (g grpcDB) StreamExecute(ctx context.Context, r *psdbv1alpha1.ExecuteRequest, onMsg func(*psdbv1alpha1.ExecuteResponse)) error {
	s, err := g.c.StreamExecute(ctx, r, g.opts...)
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		onMsg(m)
	}
}

// dialGRPC: one grpc-go ClientConn (HTTP/2 over TLS, ALPN h2) for the good and the bad
// credentials. gzip: every request compressed (grpc.UseCompressor(gzip.Name)).
// identity: requests uncompressed. In both, grpc-go advertises every registered
// compressor in grpc-accept-encoding, so gzip once encoding/gzip is imported, and the
// gateway may compress answers. It cannot be narrowed to identity:
// experimental.AcceptCompressors() with no names (or only "identity") is a no-op in
// grpc-go 1.82 through 1.85, whatever its doc comment says.
func dialGRPC(cfg config, v variant, w *wireStats) (good, bad db, closeFn func(), err error) {
	conn, err := grpc.NewClient(cfg.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(cfg.tls.Clone())),
		grpc.WithStatsHandler(grpcStats{w}))
	if err != nil {
		return nil, nil, nil, err
	}
	var opts []grpc.CallOption
	if v.gzip {
		opts = append(opts, grpc.UseCompressor(gzip.Name))
	}
	c := psdbv1alpha1.NewDatabaseClient(conn)
	batch := ferryv1alpha1.NewDatabaseClient(conn)
	client := func(pw string) db {
		return grpcDB{c, batch, append(slices.Clip(opts), grpc.PerRPCCredentials(grpcCreds(basicAuth(cfg.user, pw))))}
	}
	return client(cfg.pw), client(cfg.pw + "-wrong"), func() { conn.Close() }, nil
}

// ---- connect-go ----

// connectAuth sets the Authorization header on every call, unary or streaming.
type connectAuth string

func (a connectAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(a))
		return next(ctx, req)
	}
}
func (a connectAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(a))
		return conn
	}
}
func (a connectAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// wireRecorder is the http.Client under connect-go: it notes each exchange's HTTP
// version, encodings and content type.
type wireRecorder struct {
	inner *http.Client
	w     *wireStats
}

func (r wireRecorder) Do(req *http.Request) (*http.Response, error) {
	// The headers each protocol names its message encoding in: Connect unary
	// (Content-Encoding), Connect streaming (Connect-Content-Encoding), gRPC (Grpc-Encoding).
	enc := func(h http.Header) string {
		for _, k := range []string{"Grpc-Encoding", "Connect-Content-Encoding", "Content-Encoding"} {
			if v := h.Get(k); v != "" {
				return v
			}
		}
		return "identity"
	}
	reqEnc := enc(req.Header)
	resp, err := r.inner.Do(req)
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.calls++
	r.w.reqEnc[reqEnc]++
	if err != nil {
		return resp, err
	}
	r.w.proto[resp.Proto]++
	if resp.Uncompressed {
		// net/http asked for gzip itself and inflated it: connect-go never saw it.
		r.w.respEnc["gzip (inflated by net/http)"]++
	} else {
		r.w.respEnc[enc(resp.Header)]++
	}
	r.w.contentType[resp.Header.Get("Content-Type")]++
	return resp, nil
}

type connectDB struct {
	c     psdbv1alpha1connect.DatabaseClient
	batch ferryv1alpha1connect.DatabaseClient
}

func (d connectDB) ExecuteBatch(ctx context.Context, r *ferryv1alpha1.ExecuteBatchRequest) (*ferryv1alpha1.ExecuteBatchResponse, error) {
	resp, err := d.batch.ExecuteBatch(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (d connectDB) CreateSession(ctx context.Context, r *psdbv1alpha1.CreateSessionRequest) (*psdbv1alpha1.CreateSessionResponse, error) {
	resp, err := d.c.CreateSession(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}
func (d connectDB) Execute(ctx context.Context, r *psdbv1alpha1.ExecuteRequest) (*psdbv1alpha1.ExecuteResponse, error) {
	resp, err := d.c.Execute(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}
func (d connectDB) Prepare(ctx context.Context, r *psdbv1alpha1.PrepareRequest) (*psdbv1alpha1.PrepareResponse, error) {
	resp, err := d.c.Prepare(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}
func (d connectDB) CloseSession(ctx context.Context, r *psdbv1alpha1.CloseSessionRequest) (*psdbv1alpha1.CloseSessionResponse, error) {
	resp, err := d.c.CloseSession(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}
func (d connectDB) StreamExecute(ctx context.Context, r *psdbv1alpha1.ExecuteRequest, onMsg func(*psdbv1alpha1.ExecuteResponse)) error {
	s, err := d.c.StreamExecute(ctx, connect.NewRequest(r))
	if err != nil {
		return err
	}
	defer s.Close()
	for s.Receive() {
		onMsg(s.Msg())
	}
	return s.Err()
}

// dialConnect: connect-go over net/http's HTTP/2 (HTTP/2 only, no fallback) or quic-go's
// HTTP/3, Connect or gRPC protocol, binary proto. Neither transport adds an
// Accept-Encoding of its own (DisableCompression), so every encoding on the wire is
// connect-go's. gzip: every request gzip (WithSendGzip), gzip accepted (the default).
// identity: nothing sent compressed and gzip not accepted (WithAcceptCompression(gzip, nil, nil)).
func dialConnect(cfg config, v variant, w *wireStats) (good, bad db, closeFn func(), err error) {
	var hc *http.Client
	switch v.transport {
	case "h2":
		var p http.Protocols
		p.SetHTTP2(true)
		tr := &http.Transport{TLSClientConfig: cfg.tls.Clone(), Protocols: &p, DisableCompression: true}
		hc = &http.Client{Transport: tr}
		closeFn = tr.CloseIdleConnections
	case "h3":
		tr := &http3.Transport{TLSClientConfig: cfg.tls.Clone(), DisableCompression: true}
		hc = &http.Client{Transport: tr}
		closeFn = func() { tr.Close() }
	default:
		return nil, nil, nil, fmt.Errorf("unknown transport %q", v.transport)
	}
	var opts []connect.ClientOption
	if v.protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	if v.gzip {
		opts = append(opts, connect.WithSendGzip())
	} else {
		opts = append(opts, connect.WithAcceptCompression("gzip", nil, nil))
	}
	base := "https://" + cfg.addr
	rec := wireRecorder{hc, w}
	client := func(pw string) db {
		o := slices.Concat(opts, []connect.ClientOption{connect.WithInterceptors(connectAuth(basicAuth(cfg.user, pw)))})
		return connectDB{psdbv1alpha1connect.NewDatabaseClient(rec, base, o...), ferryv1alpha1connect.NewDatabaseClient(rec, base, o...)}
	}
	return client(cfg.pw), client(cfg.pw + "-wrong"), closeFn, nil
}
