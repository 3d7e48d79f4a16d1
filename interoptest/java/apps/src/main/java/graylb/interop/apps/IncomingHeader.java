package graylb.interop.apps;

import jakarta.servlet.http.HttpServletRequest;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/** Seed 000's ContextHandler for WebMvc: a header of the request this thread serves. */
final class IncomingHeader {
    private IncomingHeader() {}

    static String get(String name) {
        RequestAttributes a = RequestContextHolder.getRequestAttributes();
        if (!(a instanceof ServletRequestAttributes sa)) {
            return null;
        }
        HttpServletRequest r = sa.getRequest();
        return r.getHeader(name);
    }
}
