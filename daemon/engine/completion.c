/* SPDX-License-Identifier: MIT */
/* The completion policies' table and what they share (daemon/completion.h). */
#include "daemon/engine/completion.h"

#include <errno.h>
#include <string.h>

#include "daemon/engine/engine_private.h"

static const struct completion_policy *const policies[HBG_COMPLETION_COUNT] = {
        [HBG_COMPLETION_EAGER] = &completion_eager,
        [HBG_COMPLETION_LAZY] = &completion_lazy,
        [HBG_COMPLETION_RESOLVER] = &completion_resolver,
        [HBG_COMPLETION_EAGER_BATCHED] = &completion_eager_batched,
};

const struct completion_policy *completion_policy(enum hbg_completion_mode mode) {
        return (unsigned)mode < HBG_COMPLETION_COUNT ? policies[mode] : NULL;
}

const char *hbg_completion_mode_name(enum hbg_completion_mode mode) {
        const struct completion_policy *p = completion_policy(mode);
        return p ? p->name : NULL;
}

int hbg_completion_mode_parse(const char *name, enum hbg_completion_mode *ret) {
        for (unsigned m = 0; name && m < HBG_COMPLETION_COUNT; m++)
                if (strcmp(policies[m]->name, name) == 0) {
                        *ret = (enum hbg_completion_mode)m;
                        return 0;
                }
        return -EINVAL;
}
