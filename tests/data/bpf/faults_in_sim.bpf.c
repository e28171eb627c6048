// Loads in the simulator (it has no verifier), then reads far outside the
// socket on the first loss: the simulator's VM stops it there.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/far_ssthresh")
__u32 BPF_PROG(far_ssthresh, struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	__u32 i = ((struct tcp_sock *)sk)->snd_cwnd;

	return icsk->icsk_ca_priv[i * 100000];
}

SEC("struct_ops/far_avoid")
void BPF_PROG(far_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_cwnd += acked;
}

SEC("struct_ops/far_undo")
__u32 BPF_PROG(far_undo, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops far = {
	.ssthresh = (void *)far_ssthresh,
	.cong_avoid = (void *)far_avoid,
	.undo_cwnd = (void *)far_undo,
	.name = "far",
};
