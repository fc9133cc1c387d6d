/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel's short integer names for every interface header (bpf/intf.h,
 * tc-qdisc/src/bpf/intf.h, netns-lab/src/bpf/intf.h): BPF code has them
 * from vmlinux.h, bindgen from here.
 */
#ifndef DCTCP_BPF_INTF_TYPES_H
#define DCTCP_BPF_INTF_TYPES_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
#endif

#endif /* DCTCP_BPF_INTF_TYPES_H */
