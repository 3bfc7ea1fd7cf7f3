/* SPDX-License-Identifier: MIT */
#include "tests/check_main.h"

#include <signal.h>
#include <stdlib.h>

int main(void) {
        const struct check_main *m = &check_main;

        if (m->ignore_sigpipe)
                signal(SIGPIPE, SIG_IGN);
        if (m->setup) {
                int rc = m->setup();
                if (rc == CHECK_SKIP)
                        return CHECK_SKIP;
                if (rc != 0)
                        return EXIT_FAILURE;
        }
        SRunner *sr = srunner_create(m->suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        if (m->teardown)
                m->teardown();
        if (failed)
                return EXIT_FAILURE;
        return m->skipped ? m->skipped() : EXIT_SUCCESS;
}
