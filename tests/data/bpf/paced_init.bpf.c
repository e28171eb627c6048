// Asks for pacing in init only (SK_PACING_NEEDED, as BBR does) at a fixed
// 10 Mbit/s, with a window far above the path's BDP and buffer: the rate,
// not the window, limits it. tests/test_bpf.py.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define RATE_BYTES 1250000ULL
#define WINDOW 200

SEC("struct_ops/pi_init")
void BPF_PROG(pi_init, struct sock *sk)
{
	sk->sk_pacing_status = SK_PACING_NEEDED;
	sk->sk_pacing_rate = RATE_BYTES;
	((struct tcp_sock *)sk)->snd_cwnd = WINDOW;
}

SEC("struct_ops/pi_ssthresh")
__u32 BPF_PROG(pi_ssthresh, struct sock *sk) { return WINDOW; }

SEC("struct_ops/pi_cong_control")
void BPF_PROG(pi_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	((struct tcp_sock *)sk)->snd_cwnd = WINDOW;
}

SEC("struct_ops/pi_undo")
__u32 BPF_PROG(pi_undo, struct sock *sk) { return WINDOW; }

SEC(".struct_ops")
struct tcp_congestion_ops paced_init = {
	.init = (void *)pi_init,
	.ssthresh = (void *)pi_ssthresh,
	.cong_control = (void *)pi_cong_control,
	.undo_cwnd = (void *)pi_undo,
	.name = "paced_init",
};
