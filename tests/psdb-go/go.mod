module ferry.test/psdb-go

go 1.26.0

require (
	connectrpc.com/connect v1.18.1
	github.com/planetscale/psdb v0.0.0-20250717190954-65c6661ab6e4
	github.com/planetscale/vitess-types v0.0.0-20250409004758-020920d5ec5a
	github.com/quic-go/quic-go v0.65.0
)

require (
	github.com/klauspost/compress v1.16.7 // indirect
	github.com/klauspost/connect-compress/v2 v2.0.0 // indirect
	github.com/planetscale/vtprotobuf v0.6.0 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/segmentio/asm v1.2.0 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/protobuf v1.35.1 // indirect
)
