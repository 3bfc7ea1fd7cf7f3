/* SPDX-License-Identifier: MIT */
/*
 * A task may have at most 16 fanins (HBG_MAX_FANINS: a slot's fixed
 * array). More are joined first in, first out: fanins at the head of the
 * line become one dummy task, which goes to the end of the line, until 16
 * are left. A dummy of 16 takes 15 off the line; the first one takes only
 * as many as leave a multiple of 15 beyond 16, every later one 16. So n >
 * 16 fanins take ceil((n - 16) / 15) dummies, the fewest possible. The
 * line goes round (the first dummies join the oldest fanins, later ones
 * the dummies), and with the short dummy first, among the oldest, no
 * fanin is more dummies deep than levels of 16 need: one up to 256
 * fanins, L where 16^L < n <= 16^(L + 1).
 */
#include "libclient/fanin_join.h"

#include <string.h>

#include "shm/layout.h"

int hbgc_fanin_join(hbg_client *c, uint64_t *deps, size_t *n, hbgc_dummy_writer write) {
        /* The line is a ring in deps[]: a dummy takes at least 2 and gives
         * back 1, so after a take its end is free. It stays ascending: a
         * dummy's id is newer than every fanin and every dummy before it. */
        const size_t cap = *n;
        size_t head = 0, len = *n;
        size_t k = len > HBG_MAX_FANINS ? (len - HBG_MAX_FANINS) % (HBG_MAX_FANINS - 1) + 1 : 0;
        if (k == 1)
                k = HBG_MAX_FANINS;
        for (; len > HBG_MAX_FANINS; k = HBG_MAX_FANINS) {
                uint64_t group[HBG_MAX_FANINS], id;
                for (size_t j = 0; j < k; j++)
                        group[j] = deps[(head + j) % cap];
                int err = write(c, group, k, &id);
                if (err < 0)
                        return err;
                head = (head + k) % cap;
                len -= k;
                deps[(head + len) % cap] = id;
                len++;
        }
        if (head != 0) {
                uint64_t line[HBG_MAX_FANINS];
                for (size_t j = 0; j < len; j++)
                        line[j] = deps[(head + j) % cap];
                memcpy(deps, line, len * sizeof(line[0]));
        }
        *n = len;
        return 0;
}
