// Reads a tcp_sock field the simulator does not model (the receive window).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/rw_ssthresh")
__u32 BPF_PROG(rw_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	return tp->snd_cwnd > tp->rcv_wnd ? 2 : tp->snd_cwnd >> 1;
}

SEC("struct_ops/rw_avoid")
void BPF_PROG(rw_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
}

SEC("struct_ops/rw_undo")
__u32 BPF_PROG(rw_undo, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops rw = {
	.ssthresh = (void *)rw_ssthresh,
	.cong_avoid = (void *)rw_avoid,
	.undo_cwnd = (void *)rw_undo,
	.name = "rw",
};
