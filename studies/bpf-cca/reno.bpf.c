// Reno (RFC 5681) as a BPF struct_ops congestion control, written for
// ccbench. Slow start adds one segment per acked segment up to ssthresh;
// congestion avoidance adds one segment per window of acked segments; a loss
// halves the window (never below 2 segments). Loss recovery itself is TCP's.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

static __always_inline struct tcp_sock *as_tcp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/* Grow the window only when the sender uses it: in slow start while it is
 * below twice what was in flight, otherwise when the last window was full. */
static __always_inline int window_used(struct tcp_sock *tp)
{
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return 1;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return 0;
}

SEC("struct_ops/reno_grow")
void BPF_PROG(reno_grow, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = as_tcp(sk);

	if (!window_used(tp))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
}

SEC("struct_ops/reno_halve")
__u32 BPF_PROG(reno_halve, struct sock *sk)
{
	__u32 half = as_tcp(sk)->snd_cwnd >> 1;

	return half > 2 ? half : 2;
}

SEC("struct_ops/reno_undo")
__u32 BPF_PROG(reno_undo, struct sock *sk)
{
	struct tcp_sock *tp = as_tcp(sk);

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops bpf_reno = {
	.ssthresh = (void *)reno_halve,
	.cong_avoid = (void *)reno_grow,
	.undo_cwnd = (void *)reno_undo,
	.name = "bpf_reno",
};
