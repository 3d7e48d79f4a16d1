package graylb.interop.apps;

import java.io.IOException;
import org.springframework.http.HttpRequest;
import org.springframework.http.client.ClientHttpRequestExecution;
import org.springframework.http.client.ClientHttpRequestInterceptor;
import org.springframework.http.client.ClientHttpResponse;

/**
 * Passes the incoming request's gray header on to the next hop, as it was received (seeds 000 and
 * 001 pass the tag on; neither rewrites it). A record's handler sets it through RECORD.
 */
final class PassGrayHeader implements ClientHttpRequestInterceptor {
    static final ThreadLocal<String> RECORD = new ThreadLocal<>();
    private final String header;

    PassGrayHeader(String header) {
        this.header = header;
    }

    @Override
    public ClientHttpResponse intercept(HttpRequest request, byte[] body, ClientHttpRequestExecution execution)
            throws IOException {
        String v = IncomingHeader.get(header);
        if (v == null) {
            v = RECORD.get();
        }
        if (v != null && !request.getHeaders().containsKey(header)) {
            request.getHeaders().set(header, v);
        }
        return execution.execute(request, body);
    }
}
