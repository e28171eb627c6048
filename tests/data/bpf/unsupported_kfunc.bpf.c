// Valid for the kernel, but calls a kernel function the simulator does not
// provide (CUBIC's own hooks).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void cubictcp_init(struct sock *sk) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops/borrow_init")
void BPF_PROG(borrow_init, struct sock *sk)
{
	cubictcp_init(sk);
}

SEC("struct_ops/borrow_ssthresh")
__u32 BPF_PROG(borrow_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/borrow_avoid")
void BPF_PROG(borrow_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/borrow_undo")
__u32 BPF_PROG(borrow_undo, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops borrow = {
	.init = (void *)borrow_init,
	.ssthresh = (void *)borrow_ssthresh,
	.cong_avoid = (void *)borrow_avoid,
	.undo_cwnd = (void *)borrow_undo,
	.name = "borrow",
};
