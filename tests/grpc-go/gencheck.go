package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// The generated packages register their descriptors with protoregistry.GlobalFiles.
	_ "ferry.test/grpc-go/gen/ferry/v1alpha1"
	_ "ferry.test/grpc-go/gen/psdb/v1alpha1"
	_ "ferry.test/grpc-go/gen/vitess/query"
	_ "ferry.test/grpc-go/gen/vitess/topodata"
	_ "ferry.test/grpc-go/gen/vitess/vtgate"
	_ "ferry.test/grpc-go/gen/vitess/vtrpc"
)

// checkGenerated: is gen/ current? Every .proto file under proto/ is compiled here
// (protocompile, in process) and its descriptor compared with the one the generated
// code carries, ignoring file options (buf's managed mode adds go_package and others)
// and json_name. A proto/ change that was not followed by ./generate.sh fails here.
// (./generate.sh --check is the byte-exact check; it needs buf.)
func checkGenerated(cfg config) {
	const name = "generated code matches proto/"
	var files []string
	err := filepath.WalkDir(cfg.protoDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".proto") {
			rel, _ := filepath.Rel(cfg.protoDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil || len(files) == 0 {
		skip("gen", name, "no .proto files in FERRY_PROTO_DIR=%s (%v)", cfg.protoDir, err)
		return
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{cfg.protoDir}})}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		fail("gen", name, "%s does not compile: %v", cfg.protoDir, err)
		return
	}
	var stale []string
	for _, f := range compiled {
		want := normalize(protodesc.ToFileDescriptorProto(f))
		gd, err := protoregistry.GlobalFiles.FindFileByPath(f.Path())
		if err != nil {
			stale = append(stale, f.Path()+" (not generated)")
			continue
		}
		got := normalize(protodesc.ToFileDescriptorProto(gd))
		if !proto.Equal(got, want) {
			stale = append(stale, f.Path()+" ("+firstDiff(got, want)+")")
		}
	}
	if len(stale) > 0 {
		fail("gen", name, "run tests/grpc-go/generate.sh; stale: %s", strings.Join(stale, "; "))
		return
	}
	slices.Sort(files)
	pass("gen", name, "%d files: %s", len(files), strings.Join(files, " "))
}

func normalize(fd *descriptorpb.FileDescriptorProto) *descriptorpb.FileDescriptorProto {
	fd.Options = nil
	fd.SourceCodeInfo = nil
	var msg func(m *descriptorpb.DescriptorProto)
	msg = func(m *descriptorpb.DescriptorProto) {
		for _, f := range m.Field {
			f.JsonName = nil
		}
		for _, n := range m.NestedType {
			msg(n)
		}
	}
	for _, m := range fd.MessageType {
		msg(m)
	}
	return fd
}

func firstDiff(got, want proto.Message) string {
	g := strings.Split(prototext.MarshalOptions{Multiline: true}.Format(got), "\n")
	w := strings.Split(prototext.MarshalOptions{Multiline: true}.Format(want), "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = strings.TrimSpace(g[i])
		}
		if i < len(w) {
			b = strings.TrimSpace(w[i])
		}
		if a != b {
			return "generated has " + strconvQuote(a) + " where proto/ has " + strconvQuote(b)
		}
	}
	return "differs"
}

func strconvQuote(s string) string {
	if s == "" {
		return "nothing"
	}
	return "`" + s + "`"
}
