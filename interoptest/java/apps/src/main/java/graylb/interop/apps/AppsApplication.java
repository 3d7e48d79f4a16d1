package graylb.interop.apps;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;

/**
 * The servlet applications of the mixed estate, one per profile: seed000 (the filter chain of
 * seed 000), seed001 (seed 001's Spring Cloud LoadBalancer rule on gray-tag), sca (a plain Spring
 * Cloud Alibaba service, a leaf), kafka (a Spring Kafka producer and consumer, with seed 001's
 * rule for the calls its consumer makes).
 */
@SpringBootApplication
@EnableConfigurationProperties(InteropProperties.class)
public class AppsApplication {
    public static void main(String[] args) {
        SpringApplication.run(AppsApplication.class, args);
    }
}
