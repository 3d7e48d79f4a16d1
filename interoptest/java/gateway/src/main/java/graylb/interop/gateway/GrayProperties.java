package graylb.interop.gateway;

import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** The key names and the gray-user list, by configuration only (seed 002's CustomProperty). */
@ConfigurationProperties(prefix = "interop")
public class GrayProperties {
    /** The request header that says gray (seed 002: gray-tag). */
    private String grayHeader = "gray-tag";
    /** The instance metadata key of the gray flag (seed 002: gray-tag). */
    private String grayKey = "gray-tag";
    /** The request header of the user id (seed 002: uid). */
    private String userHeader = "uid";
    /** Users whose requests go gray whatever their gray header says. */
    private List<String> grayUids = new ArrayList<>();
    /** The services routed, each at /svc/{service}/**. */
    private List<String> services = new ArrayList<>();

    public String getGrayHeader() { return grayHeader; }
    public void setGrayHeader(String v) { grayHeader = v; }
    public String getGrayKey() { return grayKey; }
    public void setGrayKey(String v) { grayKey = v; }
    public String getUserHeader() { return userHeader; }
    public void setUserHeader(String v) { userHeader = v; }
    public List<String> getGrayUids() { return grayUids; }
    public void setGrayUids(List<String> v) { grayUids = v; }
    public List<String> getServices() { return services; }
    public void setServices(List<String> v) { services = v; }
}
