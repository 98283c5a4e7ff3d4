module ferry.test/s2-vectors

go 1.26.0

require (
	github.com/golang/snappy v1.0.0
	github.com/klauspost/compress v1.20.3
)
