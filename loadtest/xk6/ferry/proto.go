package ferry

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Connect unary proto (format "proto"): psdb.v1alpha1.ExecuteRequest and the two
// fields of ExecuteResponse the client looks at, by field number
// (proto/psdb/v1alpha1): request session = 1 (message), query = 2; response
// session = 1, error = 3 (vitess.vtrpc.RPCError: message = 2, code = 3).

// protoRequest encodes an ExecuteRequest; session is the raw Session message of the
// previous answer (nil: none).
func protoRequest(sql string, session []byte) []byte {
	var b []byte
	if len(session) > 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, session)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, sql)
}

// protoAnswer reads an ExecuteResponse's session (raw) and error ("" if none).
func protoAnswer(b []byte) (session []byte, rpcErr string, err error) {
	err = fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			session = v
		case 3:
			var msg string
			var code uint64
			if err := fields(v, func(n protowire.Number, f []byte) error {
				if n == 2 {
					msg = string(f)
				}
				return nil
			}, func(n protowire.Number, x uint64) {
				if n == 3 {
					code = x
				}
			}); err != nil {
				return err
			}
			rpcErr = fmt.Sprintf("code %d: %s", code, msg)
		}
		return nil
	}, nil)
	return session, rpcErr, err
}

// fields walks one message's top-level fields: length-delimited ones to bytesFn,
// varints to varintFn (may be nil); fixed-width ones are skipped.
func fields(b []byte, bytesFn func(protowire.Number, []byte) error, varintFn func(protowire.Number, uint64)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errors.New("bad protobuf tag")
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return errors.New("bad protobuf bytes field")
			}
			if err := bytesFn(num, v); err != nil {
				return err
			}
			n = m
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return errors.New("bad protobuf varint")
			}
			if varintFn != nil {
				varintFn(num, v)
			}
			n = m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errors.New("bad protobuf field")
			}
		}
		b = b[n:]
	}
	return nil
}
