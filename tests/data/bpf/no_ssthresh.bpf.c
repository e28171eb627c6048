// A tcp_congestion_ops without ssthresh, which the kernel requires: Linux
// refuses to register it (EINVAL, with no reason given).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/ns_avoid")
void BPF_PROG(ns_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
}

SEC("struct_ops/ns_undo")
__u32 BPF_PROG(ns_undo, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops no_ssthresh = {
	.cong_avoid = (void *)ns_avoid,
	.undo_cwnd = (void *)ns_undo,
	.name = "no_ssthresh",
};
