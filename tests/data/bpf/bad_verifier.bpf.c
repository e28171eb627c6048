// Compiles, but the kernel's verifier refuses it: it indexes icsk_ca_priv
// with an unbounded value taken from the socket.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/wild_ssthresh")
__u32 BPF_PROG(wild_ssthresh, struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	__u32 i = ((struct tcp_sock *)sk)->snd_cwnd;

	return icsk->icsk_ca_priv[i];
}

SEC("struct_ops/wild_avoid")
void BPF_PROG(wild_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
}

SEC("struct_ops/wild_undo")
__u32 BPF_PROG(wild_undo, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops wild = {
	.ssthresh = (void *)wild_ssthresh,
	.cong_avoid = (void *)wild_avoid,
	.undo_cwnd = (void *)wild_undo,
	.name = "wild",
};
