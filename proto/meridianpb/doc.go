// Package meridianpb is the Go code generated from proto/meridian.proto: Meridian's client API
// over gRPC (service Meridian, one Session stream per client endpoint). The runtime serves it on
// each data node's grpc_addr; other languages generate their own stubs from the same file.
package meridianpb
