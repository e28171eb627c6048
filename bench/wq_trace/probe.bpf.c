// SPDX-License-Identifier: GPL-2.0
/* The kernel sender's write queue at each ACK it takes in: one line per
 * tcp_probe event (tcp_rcv_established, before the ACK is processed) with
 * the socket's snd_una, snd_nxt, write_seq, cwnd and packets_out, how many
 * skbs the write queue holds, the lengths of its first two (the send head
 * and the skb tcp_grow_skb would take bytes from), and the send buffer's
 * charge and size. bench/wq_trace.py loads it and reads the lines. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/tcp_probe")
int BPF_PROG(wq_at_ack, struct sock *sk, struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct sk_buff *head;
	__u32 n, head_len = 0, next_len = 0;

	if (!tp)
		return 0;
	n = sk->sk_write_queue.qlen;
	if (n > 0) {
		head = sk->sk_write_queue.next;
		head_len = head->len;
		if (n > 1)
			next_len = head->next->len;
	}
	bpf_printk("wq port %u una %u nxt %u wseq %u cwnd %u pout %u skbs %u head %u next %u queued %d sndbuf %d",
		   sk->__sk_common.skc_num, tp->snd_una, tp->snd_nxt, tp->write_seq, tp->snd_cwnd,
		   tp->packets_out, n, head_len, next_len, sk->sk_wmem_queued, sk->sk_sndbuf);
	return 0;
}
